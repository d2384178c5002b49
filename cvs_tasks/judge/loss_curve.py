"""Loss-curve trend: pure functions over parsed iterations (convergence is ``judge.convergence``).

Sampling keeps, among steady-state iterations (step > warm-up cutoff, see ``metrics.aggregate``) that
printed a finite loss, every step divisible by ``sample_every`` (values <= 0 mean 1), every
milestone step, and the first and last such step. A least-squares line through the samples
passes when its slope is below ``max_slope`` (0.0: any downward trend passes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from cvs_tasks.metrics.aggregate import warmup_cutoff
from cvs_tasks.metrics.iteration import Iteration


def _iterations(iterations: Iterable[Iteration] | Mapping[int, Iteration]) -> list[Iteration]:
    values = iterations.values() if isinstance(iterations, Mapping) else iterations
    return sorted(values, key=lambda it: it.step)


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def curve_warmup_cutoff(steps: Iterable[int], planned: int | None, last_step: int | None) -> int:
    """The warm-up cutoff for a recorded curve, counted from its own first step as the metrics count
    it (a log resumed at step 14001 warms up from there, not from step 1)."""
    return warmup_cutoff(planned, last_step, min(steps, default=1))


def sample_curve(iterations, sample_every: int, milestones: Iterable[int],
                 warmup_cutoff: int) -> list[tuple[int, float]]:
    """(step, loss) samples, sorted by step and unique."""
    rows = [it for it in _iterations(iterations) if it.step > warmup_cutoff and _finite(it.loss)]
    if not rows:
        return []
    every = sample_every if sample_every and sample_every > 0 else 1
    marks = set(milestones or ())
    first, last = rows[0].step, rows[-1].step
    return [(it.step, float(it.loss)) for it in rows
            if it.step % every == 0 or it.step in marks or it.step in (first, last)]


@dataclass(frozen=True)
class LossCurveResult:
    slope: float | None  # loss per step; None when it cannot be fitted
    n: int
    points: list[tuple[int, float]]
    decreasing: bool | None  # slope < max_slope; None when not enough points
    detail: str


def fit_loss_curve(points: Sequence[tuple[int, float]], max_slope: float) -> LossCurveResult:
    """Least-squares slope of the samples and whether it is below ``max_slope``."""
    pts = [(int(s), float(v)) for s, v in points]
    n = len(pts)
    if n >= 2:
        sx = sum(s for s, _ in pts)
        sy = sum(v for _, v in pts)
        sxx = sum(s * s for s, _ in pts)
        sxy = sum(s * v for s, v in pts)
        denom = n * sxx - sx * sx
    if n < 2 or denom == 0:
        return LossCurveResult(None, n, pts, None,
                               f"not enough points: the loss curve needs >= 2 sampled steps "
                               f"(got {n}); run more iterations or lower loss_curve.sample_every")
    slope = (n * sxy - sx * sy) / denom
    decreasing = slope < max_slope
    (s0, v0), (s1, v1) = pts[0], pts[-1]
    detail = (f"slope {slope:.6g} per step over {n} points (loss {v0:.4g}@{s0} -> {v1:.4g}@{s1}); "
              f"{'below' if decreasing else 'not below'} max_slope {max_slope:g}")
    return LossCurveResult(slope, n, pts, decreasing, detail)
