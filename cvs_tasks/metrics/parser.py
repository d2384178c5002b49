"""Incremental training-log parser: feed text as it arrives, read iterations, metrics and errors.

Feeding a log in arbitrary pieces (even split mid-line or mid-character) gives exactly the
result of feeding it whole: only complete lines are processed, the partial tail waits for the
next feed, and all state follows file order.

One path for every line: text is handled as bytes in windows of whole lines. ``grammar.HEAD``
splits a window into iteration lines (read column-wise, see ``grammar``) and the text between
them; only that text is searched for rare anchors (signatures, arguments dump, banners) and the
few lines holding one are decoded and read one by one. Run metrics go to ``runstats`` (exact
streaming sums), the per-step curve to ``iteration.Curve`` (thinned past 20 000 steps).

Bad input never raises: undecodable or NUL-holding lines, iteration-like lines that cannot be
read (a step number of 19+ digits) and lines of ``MAX_LINE`` bytes or more are skipped and
counted in ``lines_skipped``; memory stays bounded by a window plus ``MAX_LINE``.

Reading a file (``parse_file``, ``line_heads``: the only file I/O of the metrics package) goes in
chunks of raw bytes handed to ``LogParser.feed_bytes``, which cuts them at line ends and never
decodes what it does not read as text. Only regular files are read: a FIFO, a device or a
directory is refused with a clear error instead of hanging. Memory stays at one chunk plus the
parser's bounded state, whatever the file size.
"""

from __future__ import annotations

import math
import os
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate, compress, repeat
from operator import gt, mod, not_, sub
from pathlib import Path
from typing import Iterator

from cvs_tasks.errors import BadInput
from cvs_tasks.inputs import open_regular
from cvs_tasks.metrics import grammar, lines
from cvs_tasks.metrics.grammar import FieldChecks
from cvs_tasks.metrics.iteration import Batch, Curve, Iteration, prefix_clock, prefix_stamp
from cvs_tasks.metrics.runstats import RunStats
from cvs_tasks.metrics.signatures import ANCHORS as SIGNATURE_ANCHORS
from cvs_tasks.metrics.signatures import ANSI_RE, ITERATION_SIGNATURES, MAX_TEXT, ErrorHit, Scanner, clean
from cvs_tasks.metrics.summary import ParserViews

DIALECTS = ("auto", "megatron", "primus")
WINDOW = 1 << 20  # bytes per processing window (whole lines; small windows stay in cache)
MAX_LINE = 4 << 20  # a line this long or longer is skipped
MAX_HITS = 500  # error hits stored; past it only fatal ones (up to MAX_FATAL), the rest counted
MAX_FATAL = 100
_ANCHORS = tuple(sorted(set(SIGNATURE_ANCHORS) | set(lines.ANCHORS)
                        | {"elapsed time per iteration (", "\ufffd", "\x00"}))
_NAN = math.nan


class LogParser(ParserViews):
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
        self.facts = lines.LineFacts()
        self.stats = RunStats()
        self.curve = Curve()
        self._scanner = Scanner()
        self._features: set[str] = set()
        self._tail = b""
        self._skipping = False  # inside a line of MAX_LINE bytes or more
        self._finished = False
        self.lines = 0  # complete lines processed
        self.lines_skipped = 0
        self.errors: list[ErrorHit] = []
        self.errors_dropped = 0
        self._fatal_kept = 0
        self.fatal_seen = False
        self._error_cursor = 0
        self._fields = FieldChecks()
        self._planned: int | None = None

    # --- feeding -------------------------------------------------------------------------------
    def feed(self, text: str) -> Sequence[Iteration]:
        """Parse the complete lines in ``tail + text``; returns the iterations they held."""
        return self.feed_bytes(text.encode("utf-8", "replace"))

    def feed_bytes(self, data: bytes, collect: bool = True) -> Sequence[Iteration]:
        """``feed`` for raw bytes as read from a file (undecodable bytes are skipped and counted).

        ``collect=False`` (reading a whole file) skips building the returned iterations.
        """
        if self._finished:
            raise RuntimeError("LogParser.feed() after finish()")
        if self._skipping:
            cut = data.find(b"\n")
            if cut == -1:
                return []
            self._skipping, data = False, data[cut + 1:]
        data = self._tail + data if self._tail else data
        end = data.rfind(b"\n") + 1
        self._tail = data[end:]
        if len(self._tail) >= MAX_LINE:
            self._skip_long_line()
        made: list = []
        pos = 0
        while pos < end:
            stop = data.rfind(b"\n", pos, pos + WINDOW) + 1
            if stop <= pos:  # no newline within a window: a line of MAX_LINE bytes or more
                stop = data.find(b"\n", pos) + 1
                if stop - pos - 1 >= MAX_LINE:
                    self.lines += 1
                    self.lines_skipped += 1
                    pos = stop
                    continue
            made.extend(self._window(data[pos:stop] if (pos or stop != len(data)) else data))
            pos = stop
        return self._collect(made) if collect else []

    def _collect(self, made: list) -> Batch:
        return Batch([row for rows, others in made for row in _curve_rows(rows, others)], self._materialize)

    def _skip_long_line(self) -> None:
        self._tail, self._skipping = b"", True
        self.lines += 1
        self.lines_skipped += 1

    def finish(self) -> Sequence[Iteration]:
        """The log ended: parse the last line even without a newline. Idempotent."""
        if self._finished:
            return []
        tail, self._tail = self._tail, b""
        made = self._window(tail + b"\n") if tail and not self._skipping else []
        self._finished = True
        return self._collect(made)

    # --- one window of whole lines ---------------------------------------------------------------
    def _window(self, block: bytes) -> list:
        parts = grammar.HEAD.split(block)
        stride = grammar.HEAD_GROUPS + 1
        others = parts[0::stride]
        made: list = []
        first_line = self.lines + 1
        if len(parts) > 1:
            heads, steps, totals, rests = (parts[k::stride] for k in range(1, stride))
            groups, rejected, unreadable = grammar.read_matches(steps, totals, rests)
            self.lines_skipped += unreadable
            for j in rejected:  # "iteration 5/10 | ..." without a step time: ordinary text
                others[j] = others[j] + heads[j] + rests[j] + b"\n"  # read it with the next piece
                others[j + 1] = others[j + 1][1:]

            def line_of(j: int) -> str:
                line = others[j][others[j].rfind(b"\n") + 1:] + heads[j] + rests[j]
                return clean(line.decode("utf-8", "replace"))
        cum = list(accumulate(map(bytes.count, others, repeat(b"\n"))))  # newlines up to piece j
        self.lines += cum[-1]
        if len(parts) > 1:
            for rows in groups:
                made.extend(self._rows(rows, others, cum, first_line, line_of))
        self._scan_others(others, cum, first_line)
        return made

    def _scan_others(self, others: list[bytes], cum: list[int], first_line: int) -> None:
        """Read the lines between iteration lines that hold an anchor.

        Piece j of ``others`` is the end of iteration line j-1 (a newline), whole other lines,
        and the start of iteration line j (its prefix); only whole lines are read, so the pieces
        that hold any are joined into one text and searched for anchors at once.
        """
        last = len(others) - 1
        counts = [cum[0]] + list(map(sub, cum[1:], cum[:-1]))
        chosen = list(compress(range(last), map(gt, counts[:last], repeat(1))))
        if last and counts[0] == 1 and (not chosen or chosen[0] != 0):
            chosen.insert(0, 0)
        pieces = [others[j][: others[j].rfind(b"\n") + 1] for j in chosen] + [others[last]]
        bases = [first_line + (cum[j - 1] if j else 0) for j in chosen + [last]]
        data = b"".join(pieces)
        text = data.decode("utf-8", "replace")
        if len(text) == len(data) and "\x1b" not in text:
            lengths = list(map(len, pieces))
        else:  # colour codes go before the anchor search: "[\x1b[31mERROR\x1b[0m]" holds "[error]"
            decoded = [ANSI_RE.sub("", p.decode("utf-8", "replace")) for p in pieces]
            text, lengths = "".join(decoded), list(map(len, decoded))
        offsets = [0] + list(accumulate(lengths))
        lower = text.lower()
        if len(lower) != len(text):  # a case change altered lengths: read every line
            starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
        else:
            starts = _anchored_line_starts(lower, _ANCHORS)
        for start in starts:
            k = bisect_right(offsets, start) - 1
            line_no = bases[min(k, len(bases) - 1)] + text.count("\n", offsets[k], start)
            end = text.find("\n", start)
            self._read_line(clean(text[start: end if end != -1 else len(text)]), line_no)

    def _read_line(self, line: str, line_no: int) -> None:
        low = line.lower()
        if "elapsed time per iteration (" in low and "iteration" in low and "|" in line:
            self.lines_skipped += 1  # an iteration line the grammar could not read
            return
        found = self._scanner.scan(line, low, line_no) if any(a in low for a in SIGNATURE_ANCHORS) else None
        if found is not None:
            self._add_hit(found)
        known = self.facts.read(line, low) or found is not None
        if not known and ("\ufffd" in line or "\x00" in line):
            self.lines_skipped += 1

    def _add_hit(self, found: ErrorHit) -> None:
        self.fatal_seen = self.fatal_seen or found.fatal
        if len(self.errors) < MAX_HITS or (found.fatal and self._fatal_kept < MAX_FATAL):
            self.errors.append(found)
            self._fatal_kept += found.fatal
        else:
            self.errors_dropped += 1

    # --- iteration rows ----------------------------------------------------------------------
    def _rows(self, rows: grammar.Rows, others: list[bytes], cum: list[int], first_line: int,
              line_of) -> list:
        n = len(rows)
        self._note_features(rows, others)
        gbs = rows.col("gbs")
        if gbs is None:  # the line's own GBS, else the dump's, else the one given
            fallback_gbs = self.global_batch_size
            gbs = [float(fallback_gbs) if fallback_gbs else _NAN] * n
        clocks = ([prefix_clock(prefix_text(others[j])) for j in rows.index]
                  if self._primus_records() and self.stats.probing(rows.steps) else None)
        self.stats.add(rows.steps, rows.totals, gbs, [rows.col(f) for f in self.stats.fields.names], clocks)
        for k, name in self._fields.check(rows):
            cls, fatal = ITERATION_SIGNATURES[name]
            j = rows.index[k]
            self._add_hit(ErrorHit(name, cls, fatal, first_line + cum[j], line_of(j)[:MAX_TEXT]))
        self._planned = rows.totals[-1]
        curve = self.curve
        if curve.stride == 1:
            kept = rows
        else:
            kept = rows.subset(list(compress(range(n), map(not_, map(mod, rows.steps, repeat(curve.stride))))))
        for row in _curve_rows(kept, others):
            curve.add(row)
        curve.add(next(_curve_rows(rows.subset([n - 1]), others)))  # the latest row is always readable
        return [(rows, others)]

    def _primus_records(self) -> bool:
        """Primus' logger (``[rank-N/M]`` records) prints a cumulative average on its first steps;
        Megatron-LM's number is the average over the log interval. Only Primus lines are probed
        against their time stamps (a time-compressed stand-in's stamps mean nothing for Megatron)."""
        return self._dialect == "primus" or (self._dialect == "auto" and "rank_prefix" in self._features)

    def _note_features(self, rows: grammar.Rows, others: list[bytes]) -> None:
        f = self._features
        f.add("iterations")
        f.update(grammar.FEATURE_LABELS[label] for label in rows.plan.labels if label in grammar.FEATURE_LABELS)
        if "pairs" not in f and b"/" in b"".join(rows.text("ms") or []):
            f.add("pairs")
        if "tf_avg_form" not in f and b"(avg" in b"".join(rows.text("tflops") or []):
            f.add("tf_avg_form")
        for k in (0, len(rows) - 1):
            prefix = prefix_text(others[rows.index[k]])
            stamp = prefix_stamp(prefix)
            f.add("no_ts" if stamp is None else "ts_us" if "." in stamp else "ts_s")
            if "rank-" in prefix:
                f.add("rank_prefix")


def _curve_rows(rows: grammar.Rows, others: list[bytes]):
    """Curve rows (``iteration.COLUMNS`` order, the last item the text before ``iteration``)."""
    n = len(rows)
    columns = [rows.col(f) or [_NAN] * n for f in grammar.FIELDS]
    prefixes = [others[j][-64:] for j in rows.index]
    return zip(rows.steps, map(float, rows.totals), *columns, prefixes)


def prefix_text(other: bytes) -> str:
    """The text on an iteration line before ``iteration`` (the tail of the text before it)."""
    return clean(other[other.rfind(b"\n") + 1:].decode("utf-8", "replace"))


def _anchored_line_starts(lower: str, anchors) -> list[int]:
    """Start offsets of the lines of ``lower`` that contain any anchor (sorted, unique)."""
    starts: set[int] = set()
    find, rfind = lower.find, lower.rfind
    for anchor in anchors:
        pos = find(anchor)
        while pos != -1:
            starts.add(rfind("\n", 0, pos) + 1)
            line_end = find("\n", pos)
            if line_end == -1:
                break
            pos = find(anchor, line_end)
    return sorted(starts)


CHUNK_BYTES = 1 << 20


def iter_byte_chunks(path: str | Path | int, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Raw bytes of a regular file, ``chunk_bytes`` at a time (chunks may end mid-line).

    ``inputs.open_regular`` refuses a FIFO, a device or a directory before a byte is read (a FIFO
    or /dev/zero never ends); a live log is read as far as it was written. An int is a descriptor
    the caller already opened and checked (e.g. ``run.sandbox.open_inside``); it is closed here.
    """
    with os.fdopen(path if isinstance(path, int) else open_regular(path, "log"), "rb") as handle:
        while data := handle.read(chunk_bytes):
            yield data


def parse_file(path: str | Path, chunk_bytes: int = CHUNK_BYTES, **parser_args) -> LogParser:
    """A finished ``LogParser`` over a whole file (``parser_args`` go to its constructor).

    Bytes go to ``LogParser.feed_bytes``: the parser decodes only what it has to read as text.
    """
    parser = LogParser(**parser_args)
    for data in iter_byte_chunks(path, chunk_bytes):
        parser.feed_bytes(data, collect=False)
    parser.finish()
    return parser


def line_heads(path: str | Path | int, keep: int, first: int = 1,
               chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[int, bytes]]:
    """``(line number, its first keep bytes)`` of every line from line ``first`` on, without the
    line end. Memory stays at one chunk plus ``keep`` bytes, whatever a line's length (a 2 GB line
    is cut, never held); chunks ending before line ``first`` are only counted."""
    n, head, partial = 1, bytearray(), False
    for chunk in iter_byte_chunks(path, chunk_bytes):
        newlines = chunk.count(b"\n")
        if n + newlines < first:  # every line this chunk ends comes before ``first``
            if newlines:
                n += newlines
                head = bytearray()
                start = chunk.rfind(b"\n") + 1
            else:
                start = 0
            head += chunk[start:start + max(0, keep - len(head))]
            partial = not chunk.endswith(b"\n")
            continue
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if n >= first:
                head += chunk[start:min(end, start + max(0, keep - len(head)))]
                yield n, bytes(head)
            n, head, start = n + 1, bytearray(), end + 1
        head += chunk[start:start + max(0, keep - len(head))]
        partial = not chunk.endswith(b"\n")
    if partial and n >= first:
        yield n, bytes(head)
