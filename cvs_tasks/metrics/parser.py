"""Incremental training-log parser: feed text as it arrives, read iterations, metrics and errors.

Feeding a log in arbitrary pieces (even split mid-line or mid-character-run) gives exactly the
result of feeding it whole: only complete lines are processed, the partial tail waits for the next
``feed``, and every piece of state is either order-free or follows file order.

How it stays fast (a log can be gigabytes): text is handled in windows of whole lines. When the
C scanner is built (``native``, ``native_window``) it reads a window's iteration lines straight
into typed columns and hands back only the other lines; a window it is not sure of goes the
Python way, which gives the same result. The Python way: ``ITERATION_RE.split`` turns a window into the fields of every known iteration line plus the text
between them, all in C; fields become typed columns with ``map``/``array`` and are appended in
bulk. Only the text *between* iteration lines is searched for rare anchors (signatures, arguments
dump, banners), with ``str.find`` on a lower-cased copy; the few lines holding an anchor are read
one by one. Garbage and undecodable lines are skipped and counted in ``lines_skipped``.

Past ``retention.RETAIN`` iterations the parser keeps a thinned set of rows and folds the others
into exact run-metric sums (``cvs_tasks.metrics.retention``), so memory stays flat; such windows
go through ``lean.read_window`` (without the scanner), which captures only the fields the sums
need.

The warm-up rule and the statistics are described in ``cvs_tasks.metrics.aggregate``.
"""

from __future__ import annotations

import re
from itertools import accumulate, compress, repeat

from cvs_tasks.errors import BadInput
from cvs_tasks.metrics import lean, native, retention
from cvs_tasks.metrics import columns as columns_mod
from cvs_tasks.metrics.iteration import (
    COL, GROUPS, ITERATION_RE, STRIDE, parse_iteration_line,
)
from cvs_tasks.metrics.long_log import LongLogMixin
from cvs_tasks.metrics.native_window import NativeWindowMixin
from cvs_tasks.metrics.queries import ParserQueries
from cvs_tasks.metrics.markers import MARKER_ANCHORS, LineFacts
from cvs_tasks.metrics.signatures import (
    ANCHORS, ITERATION_SIGNATURES, ErrorHit, anchored_line_starts, clean, hit, match_line,
)
from cvs_tasks.metrics.store import IterationBatch, IterationStore
from cvs_tasks.metrics.uniform import lean_regex, learn_shape, shape_regex

DIALECTS = ("auto", "megatron", "primus")
WINDOW = 1 << 21  # characters per processing window (whole lines)
FAST_UNIFORM = True  # tests switch it off to prove both paths give the same result
NATIVE = native.AVAILABLE  # the C scanner (native.py); tests switch it off the same way
LEAN_MIN_STRIDE = 4  # below, re-reading the many kept lines costs more than the lean pass saves
_ALL_ANCHORS = tuple(sorted(set(ANCHORS) | set(MARKER_ANCHORS)))
_G = {name: GROUPS[name] for name in GROUPS}
_GN_BAD = re.compile(r"grad norm:\s*[-+]?(?:nan|inf)", re.IGNORECASE)
_LOSS_BAD = re.compile(r"\blm loss:\s*[-+]?(?:nan|inf)", re.IGNORECASE)


def _line_text(block: str, first_line: int, line_no: int) -> str:
    """The text of one line of a window (used only for the rare flagged iteration)."""
    pos = 0
    for _ in range(line_no - first_line):
        pos = block.find("\n", pos) + 1
        if pos == 0:
            return ""
    end = block.find("\n", pos)
    return clean(block[pos: end if end != -1 else len(block)])[:400]


def _windows(data, end: int, newline):
    """(start, stop) of consecutive windows of whole lines of ``data[:end]``, about WINDOW long."""
    pos = 0
    while pos < end:
        stop = end
        if end - pos > WINDOW:
            stop = data.rfind(newline, pos, pos + WINDOW) + 1
            if stop <= pos:  # one line longer than a window
                stop = data.find(newline, pos + WINDOW) + 1
        yield pos, stop
        pos = stop


class LogParser(NativeWindowMixin, LongLogMixin, ParserQueries):
    """Parse one node's training log (any dialect); see the module docstring."""

    def __init__(self, dialect: str = "auto", seq_length: int | None = None,
                 world_size: int | None = None, global_batch_size: int | None = None,
                 model: str | None = None) -> None:
        if dialect not in DIALECTS:
            raise BadInput(f"unknown log dialect {dialect!r}: use one of {', '.join(DIALECTS)}")
        for name, value in (("seq_length", seq_length), ("world_size", world_size),
                            ("global_batch_size", global_batch_size)):
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise BadInput(f"{name} must be a positive integer, got {value!r}")
        self._dialect = dialect
        self._seq, self._world, self._gbs = seq_length, world_size, global_batch_size
        self.model = model
        self._store = IterationStore()
        self.facts = LineFacts()
        self._features: set[str] = set()
        self._tail = ""
        self.lines = 0  # complete lines processed
        self.lines_skipped = 0
        self.errors: list[ErrorHit] = []
        self._error_cursor = 0
        self._loss_seen = False
        self._finished = False
        self._shape = None
        self._lean = None  # lean_regex of the current shape (None: not a plain Megatron shape)
        self._lean_bytes = None  # the same pattern for bytes windows (feed_bytes)
        self._btail = b""  # partial last line of feed_bytes
        self._stride = 1  # retention stride (1 = every row kept)
        self._folded = retention.Folded()
        self._feed_blocks: list = []  # windows of this feed: a batch re-reads a row folded later

    # --- feeding ---------------------------------------------------------------------------
    def feed(self, text: str) -> IterationBatch:
        """Parse the complete lines in ``tail + text``; returns the iterations they held."""
        if self._finished:
            raise RuntimeError("LogParser.feed() after finish()")
        if self._btail:
            raise RuntimeError("LogParser.feed() while a feed_bytes() line is incomplete: use one of them")
        self._feed_blocks = []
        data = self._tail + text if self._tail else text
        cut = data.rfind("\n")
        if cut == -1:
            self._tail = data
            return self._batch([])
        self._tail = data[cut + 1:]
        return self._batch(self._consume(data, cut + 1))

    def feed_bytes(self, data: bytes) -> IterationBatch:
        """``feed`` for raw UTF-8 bytes as read from a file (undecodable bytes become U+FFFD).

        Same result as feeding the decoded text; windows the native scanner or the lean pass can
        read are never decoded.
        Use either ``feed`` or ``feed_bytes`` on one parser.
        """
        if self._finished:
            raise RuntimeError("LogParser.feed_bytes() after finish()")
        if self._tail:
            raise RuntimeError("LogParser.feed_bytes() while a feed() line is incomplete: use one of them")
        self._feed_blocks = []
        data = self._btail + data if self._btail else data
        end = data.rfind(b"\n") + 1
        self._btail = data[end:]
        steps: list[int] = []
        for pos, stop in _windows(data, end, b"\n"):
            block = data[pos:stop] if (pos or stop != len(data)) else data
            found = self._process_native(block) if NATIVE else None
            if found is None and self._lean_ready():
                found = self._process_lean(block)
            if found is not None:  # read without decoding
                self._feed_blocks.append(block)
                if len(self._store) > retention.RETAIN:
                    self._thin()
            else:
                found = self._process(block.decode("utf-8", errors="replace"), try_native=False)
            steps.extend(found)
        return self._batch(steps)

    def finish(self) -> IterationBatch:
        """The log ended: parse the last line even without a newline. Idempotent."""
        if self._finished:
            return self._batch([])
        self._feed_blocks = []
        if self._btail:
            self._tail, self._btail = self._btail.decode("utf-8", errors="replace"), b""
        tail, self._tail = self._tail, ""
        steps = self._consume(tail + "\n", len(tail) + 1) if tail else []
        self._finished = True
        return self._batch(steps)

    def _consume(self, data: str, end: int) -> list[int]:
        steps: list[int] = []
        for pos, stop in _windows(data, end, "\n"):
            steps.extend(self._process(data[pos:stop] if (pos or stop != len(data)) else data))
        return steps

    def _batch(self, steps: list[int]) -> IterationBatch:
        blocks = self._feed_blocks
        if not blocks:
            return IterationBatch(self._store, self._materialize, steps)

        def lookup(step: int) -> tuple | None:
            for block in blocks:
                found = lean.lines_of_steps(block, [step])
                if found:
                    line = found[0] if isinstance(found[0], str) else found[0].decode("utf-8", "replace")
                    return parse_iteration_line(clean(line))
            return None
        return IterationBatch(self._store, self._materialize, steps, lookup)

    # --- one window of whole lines -------------------------------------------------------------
    def _process(self, block: str, try_native: bool = True) -> list[int]:
        self._feed_blocks.append(block)
        steps = self._process_native(block) if NATIVE and try_native else None
        if steps is not None:
            if len(self._store) > retention.RETAIN:
                self._thin()
            return steps
        tried_lean = self._lean_ready()
        if tried_lean:
            steps = self._process_lean(block)
        if steps is None:
            steps = self._process_full(block)
            if tried_lean and steps:
                self._learn_shape(block)  # e.g. the batch size changed: relearn the lean regex
        if len(self._store) > retention.RETAIN:
            self._thin()
        return steps

    def _process_full(self, block: str) -> list[int]:
        parts = None
        if self._shape is not None and FAST_UNIFORM:
            regex, constants = self._shape
            parts = regex.split(block)
            stride, index = regex.groups + 1, regex.groupindex
            others = parts[0::stride]
            if "elapsed time per iteration" in "".join(others):
                parts = None  # another line shape in this window: use the general pattern
        if parts is not None:
            n = (len(parts) - 1) // stride
            none = [None] * n

            def c(name: str) -> list:
                if name in index:
                    return parts[index[name]::stride]
                return [constants[name]] * n if name in constants else none
        else:
            parts = ITERATION_RE.split(block)
            n = (len(parts) - 1) // STRIDE
            others = parts[0::STRIDE]
            c = lambda name: parts[_G[name]::STRIDE]  # noqa: E731
            if n and FAST_UNIFORM:
                self._learn_shape(block)
        first_line = self.lines + 1
        slow_rows: list[tuple[int, int, tuple, str]] = []  # (fast rows before, line, row, text)
        hits: list[ErrorHit] = []
        newlines_before = 0
        for j in compress(range(n + 1), others):
            piece = others[j]
            self._scan_piece(piece, first_line + j + newlines_before, j, slow_rows, hits)
            newlines_before += piece.count("\n")
        self.lines += n + newlines_before

        steps = list(map(int, c("step")))
        if n:
            columns_mod.note_columns(self._features, c, n)
        columns = columns_mod.typed_columns(c, n) if n else []
        flagged = n and self._needs_row_checks(c, n)
        if not slow_rows and not flagged and self._append_columns(steps, columns, block):
            if n and not self._loss_seen and c("loss").count(None) != n:
                self._loss_seen = True
        else:
            ordered = self._ordered_rows(steps, columns, slow_rows, others, first_line, c)
            for line_no, row, gn_bad, loss_bad in ordered:
                if row[0] <= self._folded.max_step and self._store.position(row[0]) is None:
                    self._folded.late = True  # may repeat a step already folded into the sums
                self._store.put_row(row)
                self._row_checks(row, line_no, gn_bad, loss_bad, hits, block, first_line)
            steps = [item[1][0] for item in ordered]
        hits.sort(key=lambda h: h.line)
        self.errors.extend(hits)
        return steps

    def _learn_shape(self, block: str) -> None:
        """Remember the shape of the window's last line when it is a known iteration line."""
        start = block.rfind("\n", 0, len(block) - 1) + 1
        line = block[start:]
        if ITERATION_RE.fullmatch(line):
            shape = learn_shape(line[:-1])
            if shape is not None:
                self._shape = shape_regex(shape)
                self._lean = lean_regex(line[:-1], shape)
                self._lean_bytes = (re.compile(self._lean.pattern.encode("utf-8"), re.MULTILINE)
                                    if self._lean is not None else None)

    # --- retention: rows past RETAIN are folded into exact sums ----------------------------------
    def _lean_ready(self) -> bool:
        # lean rows carry no loss value: only once a finite loss is known at an earlier step
        return (self._lean is not None and self._stride >= LEAN_MIN_STRIDE and self._loss_seen
                and FAST_UNIFORM)

    def _needs_row_checks(self, c, n: int) -> bool:
        """Cheap whole-column tests: does any row carry a NaN sign or a skipped step?"""
        if c("nan").count("0") != n or c("skip").count("0") != n:
            return True
        if "n" in "".join(filter(None, c("gn"))).lower():
            return True
        losses = c("loss")
        missing = losses.count(None)
        if missing and (self._loss_seen or missing != n):
            return True
        return "n" in "".join(filter(None, losses)).lower()

    def _ordered_rows(self, steps, columns, slow_rows, others, first_line, c):
        """Fast and slow rows merged in file order: (line, row, grad norm bad, loss bad)."""
        fast = []
        if steps:
            cum = list(accumulate(map(str.count, others, repeat("\n"))))
            bad = lambda s: s is not None and "n" in s.lower()  # noqa: E731  nan / inf printed
            gn_bad = map(bad, c("gn"))
            loss_bad = map(bad, c("loss"))
            fast = [(first_line + i + cum[i], row, g, lo) for i, (row, g, lo) in
                    enumerate(zip(zip(steps, *columns[1:]), gn_bad, loss_bad))]
        merged = []
        k = 0
        for before, line_no, row, line in slow_rows:
            merged.extend(fast[k:before])
            k = before
            merged.append((line_no, row, bool(_GN_BAD.search(line)), bool(_LOSS_BAD.search(line))))
        merged.extend(fast[k:])
        return merged

    def _row_checks(self, row, line_no, gn_bad, loss_bad, hits, block, first_line) -> None:
        """Iteration-line signatures: NaN counters, non-finite grad norm or loss, missing loss."""
        loss = row[COL["loss"]]
        name = None
        if row[COL["nan_iters"]] > 0:
            name = "nan_iterations"
        elif gn_bad:
            name = "grad_norm_not_finite"
        elif loss_bad:
            name = "lm_loss_not_finite"
        elif loss != loss and self._loss_seen:
            name = "lm_loss_missing"
        elif row[COL["skipped"]] > 0:
            name = "skipped_iterations"
        if loss == loss and not loss_bad:
            self._loss_seen = True
        if name is not None:
            cls, fatal = ITERATION_SIGNATURES[name]
            hits.append(ErrorHit(name, cls, fatal, line_no, _line_text(block, first_line, line_no)))

    # --- text between iteration lines ------------------------------------------------------------
    def _scan_piece(self, piece, first_line, fast_before, slow_rows, hits) -> None:
        lower = piece.lower()
        if len(lower) != len(piece):
            starts = [0] + [i + 1 for i, ch in enumerate(piece) if ch == "\n"][:-1]
        else:
            starts = anchored_line_starts(lower, _ALL_ANCHORS)
        line_no, prev = first_line, 0
        for start in starts:
            line_no += piece.count("\n", prev, start)
            prev = start
            end = piece.find("\n", start)
            raw = piece[start: end if end != -1 else len(piece)]
            self._read_line(clean(raw), line_no, fast_before, slow_rows, hits)

    def _read_line(self, line, line_no, fast_before, slow_rows, hits) -> None:
        low = line.lower()
        known = False
        if "elapsed time per iteration (ms)" in low and "iteration" in low:
            row = parse_iteration_line(line)
            if row is None:
                self.lines_skipped += 1
                return
            slow_rows.append((fast_before, line_no, row, line))
            columns_mod.note_line(self._features, line)
            known = True
        sig = match_line(line, low)
        if sig is not None:
            hits.append(hit(sig, line_no, line))
            known = True
        if not known:
            known = self.facts.read(line, low)
        if not known and ("\ufffd" in line or "\x00" in line):
            self.lines_skipped += 1

    # --- reading ---------------------------------------------------------------------------
