"""One training iteration as the log reports it (``grammar`` reads the lines), and the per-step
curve of them kept for reports and the watcher.

A row is a tuple in ``COLUMNS`` order with NaN for "not printed"; ``Iteration`` is the public,
None-for-missing form built from a row.

The curve (``Curve``) keeps every step of a realistic run, thinned evenly past ``MAX_ROWS`` so a
log of any length stays bounded (run metrics never depend on it; ``runstats`` keeps them exact).
Thinning doubles a stride and keeps the steps that are multiples of it plus the latest step, so a
log of any length keeps between ``MAX_ROWS / 2`` and ``MAX_ROWS`` rows spread over the run (plus
the latest row, whatever its step). Rows become ``Iteration`` objects only when read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

NAN = float("nan")

COLUMNS: tuple[str, ...] = (
    "step", "total", "elapsed_ms", "elapsed_avg_ms", "tflops", "tflops_avg", "tokens_per_gpu",
    "tokens_avg", "lr", "global_batch_size", "loss", "grad_norm", "skipped", "nan_iters",
    "mem_ratio", "timestamp",
)
COL = {name: i for i, name in enumerate(COLUMNS)}


@dataclass(frozen=True)
class Iteration:
    """One logged iteration; None means the line did not carry the field.

    ``tokens_per_gpu`` is the logged value, or GBS*seq/(s*world) when the log prints none and
    seq length and world size are known. ``tflops_avg``/``tokens_avg`` are the backend's own
    running averages (Primus Y of X/Y), kept for display only. ``mem_ratio`` is 0-1 (ROCm
    ``mem usages:`` or Primus hip ``usage_ratio`` % / 100). ``timestamp`` is unix seconds of the
    Megatron ``[YYYY-MM-DD HH:MM:SS(.f)]`` stamp, read as UTC.
    """

    step: int
    total: int | None
    elapsed_ms: float | None
    tflops: float | None
    tflops_avg: float | None
    tokens_per_gpu: float | None
    tokens_avg: float | None
    lr: float | None
    loss: float | None
    grad_norm: float | None
    skipped: int | None
    nan_iters: int | None
    mem_ratio: float | None
    timestamp: float | None
    global_batch_size: int | None = None
    elapsed_avg_ms: float | None = None


def _opt(x: float) -> float | None:
    return None if x != x else x


def _opt_int(x: float) -> int | None:
    return None if x != x or math.isinf(x) else int(x)


def iteration_from_row(row, tokens_derived: float | None = None) -> Iteration:
    """Build the public record from a stored row; ``tokens_derived`` fills a missing tokens value."""
    tokens = _opt(row[6])
    if tokens is None:
        tokens = tokens_derived
    return Iteration(
        step=int(row[0]), total=_opt_int(row[1]), elapsed_ms=_opt(row[2]), tflops=_opt(row[4]),
        tflops_avg=_opt(row[5]), tokens_per_gpu=tokens, tokens_avg=_opt(row[7]), lr=_opt(row[8]),
        loss=_opt(row[10]), grad_norm=_opt(row[11]), skipped=_opt_int(row[12]),
        nan_iters=_opt_int(row[13]), mem_ratio=_opt(row[14]), timestamp=_opt(row[15]),
        global_batch_size=_opt_int(row[9]), elapsed_avg_ms=_opt(row[3]),
    )


def timestamp_seconds(text: str | None) -> float:
    """``YYYY-MM-DD HH:MM:SS(.ffffff)`` -> unix seconds (read as UTC); NaN when absent or invalid."""
    try:
        return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()
    except (TypeError, ValueError):
        return NAN


STAMP_RE = re.compile(r"\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?)\]")


def prefix_stamp(prefix: str) -> str | None:
    """The last Megatron ``[YYYY-MM-DD HH:MM:SS(.f)]`` stamp in the text before ``iteration``."""
    found = STAMP_RE.findall(prefix)
    return found[-1] if found else None


# Primus' loguru header (1-s resolution): "[20260821 16:40:19][rank-7/8]..."
_LOGURU_STAMP_RE = re.compile(r"\[(\d{4})(\d\d)(\d\d) (\d\d:\d\d:\d\d)\]")


def prefix_clock(prefix: str) -> tuple[float, float]:
    """(unix seconds, resolution in seconds) of an iteration line's time stamp: Megatron's own,
    else Primus' loguru header; (NaN, NaN) when the line has none."""
    stamp = prefix_stamp(prefix)
    if stamp is not None:
        return timestamp_seconds(stamp), 1e-6 if "." in stamp else 1.0
    found = _LOGURU_STAMP_RE.findall(prefix)
    if found:
        y, m, d, hms = found[-1]
        return timestamp_seconds(f"{y}-{m}-{d} {hms}"), 1.0
    return NAN, NAN


# --- the curve ------------------------------------------------------------------------------------
MAX_ROWS = 20_000
Make = Callable[[tuple], Iteration]


class Curve:
    """step -> row, thinned by a doubling stride; a repeated step keeps its last line."""

    def __init__(self) -> None:
        self.rows: dict[int, tuple] = {}
        self.stride = 1
        self.latest: tuple | None = None  # the last row read, kept or not
        self._sorted: list[int] | None = None

    def add(self, row: tuple) -> None:
        self.latest = row
        self._sorted = None
        if row[0] % self.stride:
            return
        self.rows[row[0]] = row
        if len(self.rows) > MAX_ROWS:
            self.stride *= 2
            self.rows = {s: r for s, r in self.rows.items() if s % self.stride == 0}

    def get(self, step: int) -> tuple | None:
        row = self.rows.get(step)
        if row is None and self.latest is not None and self.latest[0] == step:
            return self.latest
        return row

    def sorted_steps(self) -> list[int]:
        if self._sorted is None:
            steps = set(self.rows)
            if self.latest is not None:
                steps.add(self.latest[0])
            self._sorted = sorted(steps)
        return self._sorted


class IterationMap(Mapping[int, Iteration]):
    """step -> Iteration over the kept curve, sorted by step."""

    def __init__(self, curve: Curve, make: Make) -> None:
        self._curve, self._make = curve, make

    def __getitem__(self, step: int) -> Iteration:
        row = self._curve.get(step) if isinstance(step, int) else None
        if row is None:
            raise KeyError(step)
        return self._make(row)

    def __iter__(self) -> Iterator[int]:
        return iter(list(self._curve.sorted_steps()))

    def __len__(self) -> int:
        return len(self._curve.sorted_steps())


class Batch(Sequence[Iteration]):
    """The iterations one ``feed`` read, in log order; each built only when read."""

    def __init__(self, rows: list[tuple], make: Make) -> None:
        self._rows, self._make = rows, make

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self._make(row) for row in self._rows[index]]
        return self._make(self._rows[index])
