"""The parser's long-log half: fold rows past ``retention.RETAIN`` into exact sums, and the lean pass.

``LogParser`` inherits these methods; they use its store, shape regexes and counters. Kept apart
so the parser module stays about reading lines, and this one about bounded memory.
"""

from __future__ import annotations

from array import array
from itertools import compress, islice
from operator import lt, not_

from cvs_tasks.metrics import aggregate, lean, retention
from cvs_tasks.metrics import columns as columns_mod
from cvs_tasks.metrics.iteration import COL
from cvs_tasks.metrics.signatures import ErrorHit


class LongLogMixin:
    """Retention and the lean pass for ``LogParser`` (see ``retention`` and ``lean``)."""

    def _after_step(self) -> int:
        last = self._store.last_step
        return max(-1 if last is None else last, self._folded.max_step)

    def _append_columns(self, steps: list[int], columns: list, block: str) -> bool:
        """Store a fast-path batch; once thinning began, fold the rows the stride does not keep."""
        if self._stride == 1 or not steps:
            return self._store.extend_columns(steps, columns)
        if steps[0] <= self._after_step() or not all(map(lt, steps, islice(steps, 1, None))):
            return False
        keep = retention.keep_mask(steps, self._stride)
        drop = list(map(not_, keep))
        if any(drop):
            cutoff = aggregate.warmup_cutoff(int(columns[COL["total"]][-1]), steps[-1])
            self._fold(list(compress(steps, drop)),
                       [None] + [array("d", compress(col, drop)) for col in columns[1:]], cutoff)
            steps = list(compress(steps, keep))
            columns = [None] + [array("d", compress(col, keep)) for col in columns[1:]]
        return self._store.extend_columns(steps, columns)

    def _fold(self, steps, cols, cutoff: int) -> None:
        """Fold stored-form rows (float columns in ``COLUMNS`` order) into the metric sums."""
        gbs = self._gbs if self._gbs else cols[COL["global_batch_size"]]
        self._folded.add(steps, cutoff, cols[COL["elapsed_ms"]], cols[COL["tflops"]],
                         cols[COL["tokens_per_gpu"]], cols[COL["mem_ratio"]], gbs, cols[COL["loss"]])

    def _thin(self) -> None:
        """The store passed RETAIN rows: double the stride and fold the rows it no longer keeps."""
        steps = self._store.steps
        self._stride = retention.next_stride(steps, self._stride, retention.RETAIN // 2)
        keep = retention.keep_mask(steps, self._stride)
        keep[0] = True
        cutoff = self.warmup_cutoff
        gone, cols = self._store.split_off(keep)
        self._fold(gone, cols, cutoff)

    def _process_lean(self, block: str) -> list[int] | None:
        """A window read with the lean regex (see ``lean``); None when it needs the full path."""
        is_text = isinstance(block, str)
        window = lean.read_window(block, self._lean if is_text else self._lean_bytes, self._stride,
                                  self._after_step())
        if window is None:
            return None
        regex, constants = self._shape
        kept_text = window.kept_text if is_text else window.kept_text.decode("utf-8", errors="replace")
        kept_parts = regex.split(kept_text)
        width, index = regex.groups + 1, regex.groupindex
        n_kept = (len(kept_parts) - 1) // width
        if n_kept != sum(window.keep) or any(kept_parts[0::width]):
            return None
        none = [None] * n_kept

        def c(name: str) -> list:
            if name in index:
                return kept_parts[index[name]::width]
            return [constants[name]] * n_kept if name in constants else none

        kept_steps = list(compress(window.steps, window.keep))
        columns = columns_mod.typed_columns(c, n_kept)
        first_line = self.lines + 1
        hits: list[ErrorHit] = []
        newlines_before = 0
        for j in compress(range(len(window.others)), window.others):
            piece = window.others[j]
            piece = piece if is_text else piece.decode("utf-8", errors="replace")
            self._scan_piece(piece, first_line + j + newlines_before, j, [], hits)
            newlines_before += piece.count("\n")
        self.lines += len(window.steps) + newlines_before
        self._store.extend_columns(kept_steps, columns)
        f = window.fields
        dropped = list(compress(window.steps, map(not_, window.keep)))
        if dropped:
            cutoff = aggregate.warmup_cutoff(int(columns[COL["total"]][-1]), window.steps[-1])
            gbs = self._gbs or columns[COL["global_batch_size"]][-1]
            self._folded.add(dropped, cutoff, f["ms"], f.get("tf"), f.get("tok"), f.get("mem1"), gbs,
                             None)
        self._loss_seen = True
        hits.sort(key=lambda h: h.line)
        self.errors.extend(hits)
        return window.steps
