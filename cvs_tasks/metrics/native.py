"""The native iteration-line scanner (``_itscan.c``) as typed columns the parser can store.

``scan`` reads one window of whole lines in C and returns the iteration lines it accepted as
columns (in ``iteration.COLUMNS`` order), already split by the retention stride into kept and
dropped rows, plus the text of every other line with the number of rows before it. The C code
accepts a line only when ``ITERATION_RE`` and the Python column code would give exactly the same
values; everything else stays "other" text, and a window whose other text still looks like an
iteration line is marked ``suspicious`` so the parser reads it in Python. Results are therefore
identical with and without the extension (tests compare both); only the speed differs.

Built by ``pip install -e .`` (setup.py); without a C compiler ``AVAILABLE`` is False and the
parser uses its pure-Python path. ``CVS_TASKS_PURE_PYTHON=1`` forces that path.
"""

from __future__ import annotations

import os
from array import array
from dataclasses import dataclass

from cvs_tasks.metrics.iteration import COLUMNS

try:
    from cvs_tasks.metrics import _itscan
except ImportError:  # not built (no compiler at install time): the pure-Python path is used
    _itscan = None

if _itscan is not None and _itscan.NCOL != len(COLUMNS):  # a stale build of an older layout
    _itscan = None

AVAILABLE = _itscan is not None and os.environ.get("CVS_TASKS_PURE_PYTHON", "") in ("", "0")
FEATURES = ("pairs", "tok_harmonic", "tok_per_gpu", "tf_avg_form", "tf_compute", "hip",
            "mem_usages", "ts_us", "ts_s", "no_ts", "rank_prefix")  # bit order of _itscan.c


@dataclass
class Rows:
    steps: array  # int64
    cols: list  # [None, then one float64 array per COLUMNS[1:]]


@dataclass
class WindowScan:
    n: int  # accepted iteration lines (repeated steps included)
    steps: array  # every accepted step, in window order
    kept: Rows  # rows the retention stride keeps (multiples of it, and the window's last row)
    dropped: Rows  # the others, to be folded into the run-metric sums
    pieces: list  # (rows before it, text) for every run of other lines
    features: set[str]
    missing_loss: int  # accepted rows that printed no lm loss
    counters_nonzero: int  # rows whose skipped or nan counter is not "0"
    increasing: bool  # steps strictly increase, once a repeated step kept only its last line
    suspicious: bool  # some other line looks like an iteration line: read the window in Python


def _rows(packed: tuple[bytes, bytes]) -> Rows:
    raw_steps, raw_cols = packed
    steps = array("q")
    steps.frombytes(raw_steps)
    n = len(steps)
    view = memoryview(raw_cols)
    cols: list = [None]
    for i in range(len(COLUMNS) - 1):
        col = array("d")
        col.frombytes(view[i * n * 8:(i + 1) * n * 8])
        cols.append(col)
    return Rows(steps, cols)


def scan(block: str | bytes, stride: int = 1, repeat_of: int = -1) -> WindowScan | None:
    """Scan a window of whole lines; None when the extension cannot read it (non-ASCII str).

    A step logged more than once (in a row, or first in the window and equal to ``repeat_of``,
    the step stored last) keeps only its last line in the rows, and such a window is not thinned:
    what the store does row by row when a step is logged again. ``steps`` still lists every line.
    """
    if _itscan is None:
        return None
    found = _itscan.scan(block, stride, repeat_of)
    if found is None:
        return None
    n, raw_steps, kept, dropped, pieces, bits, missing, nonzero, increasing, suspicious = found
    steps = array("q")
    steps.frombytes(raw_steps)
    features = {name for i, name in enumerate(FEATURES) if bits >> i & 1}
    return WindowScan(n, steps, _rows(kept), _rows(dropped), pieces, features, missing, nonzero,
                      bool(increasing), bool(suspicious))


def parse_number(text: str) -> float | None:
    """The scanner's number reader on its own (tests): float(text), or None when it declines."""
    return None if _itscan is None else _itscan.parse_number(text)


def value_counts(values: array, into: dict | None = None) -> dict[float, int] | None:
    """{value: count} of the finite values of a float64 array, in first-seen order (what a
    Counter of them gives), counted in C; added to ``into`` when given. None without the
    extension."""
    if not AVAILABLE:
        return None
    return _itscan.value_counts(values) if into is None else _itscan.value_counts(values, into)
