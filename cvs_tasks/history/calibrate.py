"""Thresholds from evidence: a threshold file derived from the last N passing runs in the history,
and the refusal of placeholder thresholds while enforcing.

The bound of each gated metric is the median of the passing runs moved by a stated margin:
``max(margin_pct % of the median, 3 x the scaled MAD)`` (MAD x 1.4826 estimates the standard
deviation without letting one odd run pull it), in the direction that would be a regression.
The file records the statistic, the margin and the runs it used, so the numbers can be audited.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

MAD_SCALE = 1.4826
MAD_WIDTHS = 3.0
DEFAULT_MARGIN_PCT = 5.0
MIN_RUNS = 3

# metric -> (threshold kind, regression direction) for the metrics a calibrated file gates
CALIBRATED: dict[str, tuple[str, str]] = {
    "training.throughput_per_gpu": ("min", "down"),
    "training.tokens_per_gpu": ("min_tok_s", "down"),
    "training.elapsed_time_per_iteration": ("max_ms", "up"),
    "training.step_time_p95_ms": ("max_ms", "up"),
    "training.mem_usage": ("max", "up"),
}
PLACEHOLDER_KINDS = frozenset({"min", "max", "max_ms", "min_tok_s", "within", "min_ratio"})


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
    kind, direction = CALIBRATED[metric]
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return None
    median = statistics.median(vals)
    mad = statistics.median(abs(v - median) for v in vals) * MAD_SCALE
    margin = max(abs(median) * margin_pct / 100.0, MAD_WIDTHS * mad)
    value = median - margin if direction == "down" else median + margin
    return Bound(metric, kind, round(value, 4), median, mad, margin, len(vals))


def calibrated_file(runs: Sequence[Mapping[str, Any]], *, margin_pct: float = DEFAULT_MARGIN_PCT,
                    min_runs: int = MIN_RUNS, source: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``runs``: [{"run_id", "started", "metrics": {combo: {metric: value}}}], the passing runs to use.

    A metric is gated only when at least ``min_runs`` of them have a value for it; mem_usage is
    optional (not every backend prints it).
    """
    cells: dict[str, dict[str, Any]] = {}
    used: dict[str, dict[str, Any]] = {}
    combos = sorted({c for r in runs for c in r["metrics"]})
    for combo in combos:
        for metric in CALIBRATED:
            values = [r["metrics"].get(combo, {}).get(metric) for r in runs]
            if sum(v is not None for v in values) < min_runs:
                continue
            b = robust_bound(metric, values, margin_pct)
            spec: dict[str, Any] = {"kind": b.kind, "value": b.value}
            if metric == "training.mem_usage":
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
            if getattr(spec, "kind", None) in PLACEHOLDER_KINDS and getattr(spec, "value", None) == 0:
                out.append(f"{path}: {cell}.{metric}: value 0 is a placeholder, not a measured bound "
                           f"(kind {spec.kind!r} would always {'fail' if spec.kind in ('max', 'max_ms') else 'pass'})")
    return out
