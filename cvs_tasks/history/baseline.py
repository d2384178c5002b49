"""The ``baseline`` threshold kind: "within X % of the median of the last N PASS runs of this config
on this cluster", and the threshold cell judged with it.

The judgement (``judge``) is pure: it takes the past values. ``baseline_rows`` fetches them from the
history for the metric stage: ``evaluate`` (judge.kinds) judges every fixed spec; the
``baseline`` specs are taken out of the cell first (``split_cell``), judged against the last PASS
runs of the same config on the same cluster, and their rows put in place of the "no threshold
defined" rows ``evaluate`` would have written (``merge_rows``).

Direction is a property of the metric (its ``better`` in ``metrics.catalog``):
a throughput gate fails only below the band, a step-time gate only above it, so an improvement
never fails. Too short a history is a RECORD row that says so, never a silent PASS; so is an
unreadable one: the history is never needed to finish a run.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from cvs_tasks.history.db import HistoryUnavailable, reading
from cvs_tasks.history.store import metric_series
from cvs_tasks.judge import kinds
from cvs_tasks.metrics import catalog
from cvs_tasks.run.records import MetricRow

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


# -- the cell judged with the history --------------------------------------------------------------
@dataclass(frozen=True)
class GateContext:
    """Where this run sits in the history: which database, which config on which cluster."""

    db_path: Path
    config_hash: str
    cluster: str
    run_id: str
    started: float


def split_cell(cell: Mapping[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(the fixed specs, the baseline specs). A cell of baseline specs only leaves ``{}`` fixed."""
    if not cell:
        return (dict(cell) if cell is not None else None), {}
    past = {n for n, s in cell.items() if kinds.judged_by_history(getattr(s, "kind", None))}
    return {n: s for n, s in cell.items() if n not in past}, {n: s for n, s in cell.items() if n in past}


def baseline_rows(ctx: GateContext, combo: str, actuals: Mapping[str, Any], specs: Mapping[str, Any],
                  enforce: bool, warn: Callable[[str], None], unit_for: Callable[[str], str]) -> list[MetricRow]:
    """One row per baseline spec. An unreadable history (damaged, wrong schema, not a file, refused)
    is a warning and RECORD rows that say why: the history is never needed to finish a run."""
    if not specs:
        return []
    settings = {name: BaselineSettings.of(spec) for name, spec in specs.items()}
    try:
        with reading(ctx.db_path, create=True) as conn:
            pasts = {name: metric_series(conn, ctx.config_hash, ctx.cluster, combo, name, limit=s.runs,
                                         verdict="PASS", before=ctx.started, exclude_run=ctx.run_id)
                     for name, s in settings.items()}
    except HistoryUnavailable as exc:
        warn(f"warning: baseline gates recorded only: history unreadable: {exc}")
        return [MetricRow(n, _number(actuals.get(n)), unit_for(n), "baseline", "RECORD",
                          f"history unreadable: {exc}; baseline not judged") for n in specs]
    rows = []
    for name, s in settings.items():
        v = judge(name, _number(actuals.get(name)), [(r, val) for r, _, val, _ in pasts[name]], s)
        status = v.status if enforce or v.status == "RECORD" else "RECORD"
        reason = v.reason if enforce else f"record only: enforce_thresholds is false ({v.reason})"
        rows.append(MetricRow(name, _number(actuals.get(name)), unit_for(name), v.expected, status, reason))
    return rows


def merge_rows(rows: list[MetricRow], extra: list[MetricRow]) -> list[MetricRow]:
    """``rows`` without the RECORD rows of metrics ``extra`` judges, then ``extra``."""
    names = {r.name for r in extra}
    return [r for r in rows if r.name not in names] + extra


def _number(value: Any) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if f == f else None
