"""The ``baseline`` threshold kind: "within X % of the median of the last N PASS runs of this config
on this cluster". Pure: the judgement takes the past values; the metric stage fetches them.

Direction is a property of the metric (its ``better`` in ``metrics.catalog``):
a throughput gate fails only below the band, a step-time gate only above it, so an improvement
never fails. Too short a history is a RECORD row that says so, never a silent PASS.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Sequence

from cvs_tasks.metrics import catalog

DEFAULT_RUNS = 5
DEFAULT_MIN_RUNS = 3


@dataclass(frozen=True)
class BaselineSettings:
    tolerance_pct: float
    runs: int = DEFAULT_RUNS
    min_runs: int = DEFAULT_MIN_RUNS

    @classmethod
    def of(cls, spec: Any) -> "BaselineSettings":
        return cls(float(getattr(spec, "tolerance_pct", None) or 0.0),
                   int(getattr(spec, "runs", None) or DEFAULT_RUNS),
                   int(getattr(spec, "min_runs", None) or DEFAULT_MIN_RUNS))


@dataclass(frozen=True)
class BaselineVerdict:
    status: str  # PASS / FAIL / RECORD
    expected: str
    reason: str
    median: float | None
    used: tuple[str, ...]  # run ids the median came from


def band(name: str, median: float, pct: float) -> tuple[float | None, float | None]:
    lo, hi = median * (1 - pct / 100.0), median * (1 + pct / 100.0)
    better = catalog.better(name)
    if better == catalog.HIGHER:
        return lo, None
    if better == catalog.LOWER:
        return None, hi
    return lo, hi


def expected_text(name: str, median: float, s: BaselineSettings, n: int) -> str:
    lo, hi = band(name, median, s.tolerance_pct)
    side = ">=" if hi is None else "<=" if lo is None else "within"
    limit = f"{lo:.4g}" if hi is None else f"{hi:.4g}" if lo is None else f"[{lo:.4g}, {hi:.4g}]"
    return f"{side} {limit} (median {median:.4g} of {n} PASS runs -/+{s.tolerance_pct:g}%)"


def judge(name: str, value: float | None, past: Sequence[tuple[str, float]], s: BaselineSettings) -> BaselineVerdict:
    """``past``: (run id, value) of the last PASS runs of this config on this cluster, oldest first."""
    recent = list(past)[-s.runs:]
    used = tuple(r for r, _ in recent)
    if len(recent) < s.min_runs:
        return BaselineVerdict("RECORD", f"baseline of {s.min_runs}+ PASS runs",
                               f"baseline: {len(recent)} of the {s.min_runs} PASS runs needed in the history of this "
                               "config on this cluster; recorded, not gated", None, used)
    median = statistics.median(v for _, v in recent)
    expected = expected_text(name, median, s, len(recent))
    if value is None:
        return BaselineVerdict("FAIL", expected, f"{name}: missing from this run's results", median, used)
    lo, hi = band(name, median, s.tolerance_pct)
    pct = 100.0 * (value - median) / abs(median) if median else 0.0
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        return BaselineVerdict("FAIL", expected,
                               f"{name}: {value:.4g} is {pct:+.1f}% from the median {median:.4g} of the last "
                               f"{len(recent)} PASS runs (allowed {s.tolerance_pct:g}%)", median, used)
    return BaselineVerdict("PASS", expected, f"{pct:+.1f}% from the median of {len(recent)} PASS runs", median, used)
