"""A threshold cell judged with the history: the ``baseline`` rows next to the plain ones.

``evaluate`` (judge.kinds) judges every fixed spec; this module takes the ``baseline`` specs out
of the cell first, judges them against the last PASS runs of the same config on the same cluster
and puts their rows in place of the "no threshold defined" rows ``evaluate`` would have written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from cvs_tasks.history.baseline import BaselineSettings, judge
from cvs_tasks.history.db import HistoryUnavailable, reading
from cvs_tasks.history.queries import metric_series
from cvs_tasks.judge import kinds
from cvs_tasks.run.records import MetricRow


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
