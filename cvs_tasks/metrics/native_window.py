"""The parser's native path: a window read by the C scanner (``native``) instead of regexes.

``LogParser`` inherits ``_process_native``. It uses the scan only when the window needs nothing
the Python path would do differently: no line that still looks like an iteration line, no
non-zero skipped/NaN counter, no missing loss once a loss was seen, steps past what is stored
that never go back (a step logged again keeps its last line). Any other window returns None
before touching the parser's state and is read by the Python path, so both paths always give the
same result.
"""

from __future__ import annotations

from cvs_tasks.metrics import aggregate, native
from cvs_tasks.metrics.iteration import COL
from cvs_tasks.metrics.signatures import ErrorHit


class NativeWindowMixin:
    """``_process_native`` for ``LogParser`` (uses its store, retention state and line reader)."""

    def _process_native(self, block: str | bytes) -> list[int] | None:
        after = self._after_step()
        last = self._store.last_step
        # Primus prints each step twice; a window may start with the second line of the step
        # stored last. The scanner keeps a step's last line, as put_row does (native.scan).
        found = native.scan(block, self._stride, last if last is not None and last == after else -1)
        if found is None or found.suspicious:
            return None
        again = bool(found.n) and found.steps[0] == after == last
        if found.n:
            if found.counters_nonzero or not found.increasing:
                return None
            if found.missing_loss and (self._loss_seen or found.missing_loss != found.n):
                return None
            if found.steps[0] < after or (found.steps[0] == after and not again):
                return None
        first_line = self.lines + 1
        hits: list[ErrorHit] = []
        slow_rows: list = []
        newlines_before = 0
        for rows_before, piece in found.pieces:
            text = piece if isinstance(piece, str) else piece.decode("utf-8", errors="replace")
            self._scan_piece(text, first_line + rows_before + newlines_before, rows_before,
                             slow_rows, hits)
            newlines_before += text.count("\n")
        # the scanner flags every line the line reader could take for an iteration line
        assert not slow_rows, "native scanner missed an iteration line"
        self.lines += found.n + newlines_before
        if found.n:
            self._features |= found.features
            self._features.add("iterations")
            kept, dropped = found.kept, found.dropped
            if dropped.steps:
                cutoff = aggregate.warmup_cutoff(int(kept.cols[COL["total"]][-1]), kept.steps[-1])
                self._fold(dropped.steps, dropped.cols, cutoff)
            if again:  # replaces the stored row of that step, as put_row does
                self._store.put_row((kept.steps[0],) + tuple(col[0] for col in kept.cols[1:]))
                kept = native.Rows(kept.steps[1:], [None] + [col[1:] for col in kept.cols[1:]])
            self._store.extend_columns(kept.steps, kept.cols)
            if found.missing_loss != found.n:
                self._loss_seen = True
        hits.sort(key=lambda h: h.line)
        self.errors.extend(hits)
        return found.steps
