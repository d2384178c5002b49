"""One training iteration as the log reports it (``grammar`` reads the lines).

A row is a tuple in ``COLUMNS`` order with NaN for "not printed"; ``Iteration`` is the public,
None-for-missing form built from a row.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone

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
