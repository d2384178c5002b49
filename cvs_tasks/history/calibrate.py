"""Thresholds from evidence: a threshold file derived from the last N passing runs in the history,
and the refusal of placeholder thresholds while enforcing.

The bound of each gated metric is the median of the passing runs moved by a stated margin:
``max(margin_pct % of the median, 3 x the scaled MAD)`` (MAD x 1.4826 estimates the standard
deviation without letting one odd run pull it), in the direction that would be a regression.
The file records the statistic, the margin and the runs it used, so the numbers can be audited.
Which metrics get a bound, in which direction and as which kind comes from the metric catalog
(``calibrate``, ``better``, ``optional``) and the kind table (``calibrates``, ``zero``).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from cvs_tasks.judge import kinds
from cvs_tasks.metrics import catalog

MAD_SCALE = 1.4826
MAD_WIDTHS = 3.0
DEFAULT_MARGIN_PCT = 5.0
MIN_RUNS = 3


def calibrated_kind(metric: catalog.Metric) -> str:
    """The kind a calibrated bound is written as: by the metric's direction, spelled with its unit
    where a spelling exists (``max_ms``, ``min_tok_s``), so calibrated files read as they always did."""
    kind = kinds.for_direction(metric.better)
    if kind is None:
        raise ValueError(f"{metric.name} is calibrated but has no direction (catalog: better)")
    return kinds.spelling(kind.name, metric.unit)


@dataclass(frozen=True)
class Bound:
    metric: str
    kind: str
    value: float
    median: float
    mad: float
    margin: float
    n: int


def robust_bound(metric: str, values: Sequence[float], margin_pct: float) -> Bound | None:
    row = catalog.get(metric)
    if row is None or not row.calibrate:
        raise ValueError(f"{metric} is not a calibrated metric (catalog: calibrate)")
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return None
    median = statistics.median(vals)
    mad = statistics.median(abs(v - median) for v in vals) * MAD_SCALE
    margin = max(abs(median) * margin_pct / 100.0, MAD_WIDTHS * mad)
    value = median - margin if row.better == catalog.HIGHER else median + margin
    return Bound(metric, calibrated_kind(row), round(value, 4), median, mad, margin, len(vals))


def calibrated_file(runs: Sequence[Mapping[str, Any]], *, margin_pct: float = DEFAULT_MARGIN_PCT,
                    min_runs: int = MIN_RUNS, source: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``runs``: [{"run_id", "started", "metrics": {combo: {metric: value}}}], the passing runs to use.

    A metric is gated only when at least ``min_runs`` of them have a value for it; one the catalog
    marks optional (not every backend prints it) gets an optional spec.
    """
    cells: dict[str, dict[str, Any]] = {}
    used: dict[str, dict[str, Any]] = {}
    combos = sorted({c for r in runs for c in r["metrics"]})
    for combo in combos:
        for metric in (m.name for m in catalog.calibrated()):
            values = [r["metrics"].get(combo, {}).get(metric) for r in runs]
            if sum(v is not None for v in values) < min_runs:
                continue
            b = robust_bound(metric, values, margin_pct)
            spec: dict[str, Any] = {"kind": b.kind, "value": b.value}
            if catalog.get(metric).optional:
                spec["optional"] = True
            cells.setdefault(combo, {})[metric] = spec
            used.setdefault(combo, {})[metric] = {"median": round(b.median, 4), "scaled_mad": round(b.mad, 4),
                                                  "margin": round(b.margin, 4), "n": b.n}
    return {
        "_calibration": {
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "statistic": f"median of the passing runs -/+ max({margin_pct:g}% of the median, "
                         f"{MAD_WIDTHS:g} x MAD x {MAD_SCALE}) in the direction of a regression",
            "margin_pct": margin_pct,
            "runs": [r["run_id"] for r in runs],
            **(dict(source) if source else {}),
            "per_cell": used,
        },
        **cells,
    }


def placeholder_problems(thresholds: Mapping[str, Mapping[str, Any]], path: Any) -> list[str]:
    """Gated specs whose bound is zero: a ``min`` of 0 always passes, a ``max`` of 0 always fails."""
    out = []
    for cell, specs in thresholds.items():
        for metric, spec in specs.items():
            kind, _ = kinds.resolve(getattr(spec, "kind", None))
            if kind is not None and kind.zero and getattr(spec, "value", None) == 0:
                out.append(f"{path}: {cell}.{metric}: value 0 is a placeholder, not a measured bound "
                           f"(kind {spec.kind!r} would always {kind.zero})")
    return out
