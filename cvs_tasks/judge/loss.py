"""The training loss judged three ways: its steady-state trend, its continuity across a checkpoint
resume, and its final value against a target. Pure functions over parsed iterations.

Trend (the loss curve): sampling keeps, among steady-state iterations (step > warm-up cutoff, see
``metrics.runstats``) that printed a finite loss, every step divisible by ``sample_every``
(values <= 0 mean 1), every milestone step, and the first and last such step. A least-squares
line through the samples passes when its slope is below ``max_slope`` (0.0: any downward trend
passes).

Checkpoint save and resume (docs/product.md#checkpoint-save-and-resume): the resume phase must
start at ``last_ckpt + 1`` (``jobs.checkpoint.last_checkpoint_step``) and its first loss may exceed
the loss at ``last_ckpt`` in the save phase by at most ``loss_rtol · |save_loss|`` (a decrease is
always fine). The save and load times are read from the logs by ``metrics.checkpoint``.

Convergence (docs/product.md#convergence): ``convergence.target_value > 0`` turns the check on
(<= 0: off). ``target_metric`` picks the loss: ``train_loss``, ``eval_loss`` (the ``validation
loss at iteration N`` lines), or ``auto`` — the eval loss when the run evaluated, else the
training loss. The last value of that loss passes when it is <= the target; the row is PASS/FAIL
when ``enforce_thresholds`` is true, else RECORD. Steps-to-target (the first step whose loss
reached the target) and time-to-target (training seconds up to it) are recorded either way. The
reference took the first step that reached the target, judged nothing, and never saw eval loss
(docs/reference_suite.md#convergence).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Sequence

from cvs_tasks.metrics.iteration import Iteration
from cvs_tasks.metrics.runstats import warmup_cutoff
from cvs_tasks.run.records import MetricRow


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


# --- trend: the loss curve ----------------------------------------------------------------------
def _iterations(iterations: Iterable[Iteration] | Mapping[int, Iteration]) -> list[Iteration]:
    values = iterations.values() if isinstance(iterations, Mapping) else iterations
    return sorted(values, key=lambda it: it.step)


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


# --- continuity across a checkpoint resume -----------------------------------------------------
@dataclass(frozen=True)
class CheckpointResult:
    ok: bool
    reason: str
    last_ckpt: int
    expected_first_step: int
    first_resumed_step: int | None
    save_loss: float | None
    resume_loss: float | None
    increase: float | None
    tolerance: float | None


def checkpoint_continuity(save_losses: Mapping[int, float], resume_losses: Mapping[int, float],
                          last_ckpt: int, rtol: float) -> CheckpointResult:
    """Check step and loss continuity across a save and a resume phase (step -> loss maps)."""
    expected = last_ckpt + 1

    def result(ok, reason, first=None, save=None, resume=None, inc=None, tol=None):
        return CheckpointResult(ok, reason, last_ckpt, expected, first, save, resume, inc, tol)

    if rtol is None or rtol < 0:
        return result(False, f"checkpoint.loss_rtol must be >= 0 (got {rtol!r})")
    if not resume_losses:
        return result(False, "the resume phase produced no iteration lines; check that the "
                             "checkpoint directory is shared and loaded")
    first = min(resume_losses)
    if first != expected:
        return result(False, f"resume started at step {first}, expected {expected} "
                             f"(last checkpoint {last_ckpt} + 1)", first)
    save, resume = save_losses.get(last_ckpt), resume_losses.get(first)
    if save is None or resume is None or save != save or resume != resume:
        which = "save phase at step %d" % last_ckpt if save is None or save != save else \
            "resume phase at step %d" % first
        return result(False, f"no loss logged in the {which}", first, save, resume)
    tol = rtol * max(abs(save), 1e-9)
    inc = resume - save
    if inc > tol:
        return result(False, f"loss rose from {save:.6g} to {resume:.6g} across the resume "
                             f"(+{inc:.4g} > tolerance {tol:.4g})", first, save, resume, inc, tol)
    return result(True, f"resumed at step {first}; loss {save:.6g} -> {resume:.6g} "
                        f"(change {inc:+.4g}, tolerance {tol:.4g})", first, save, resume, inc, tol)


# --- convergence: the final loss against a target --------------------------------------------
ROW = "training.final_loss"
METRIC_LABEL = {"train_loss": "training loss", "eval_loss": "eval (validation) loss"}


@dataclass(frozen=True)
class Convergence:
    metric: str  # train_loss | eval_loss: the loss that was judged
    target: float
    final_value: float | None
    final_step: int | None
    steps_to_target: int | None
    time_to_target_seconds: float | None
    asked: str = "auto"  # target_metric as configured

    @property
    def reached(self) -> bool:
        return self.final_value is not None and self.final_value <= self.target

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def seconds_until(steps: Sequence[tuple[int, float | None]], until: int) -> float:
    """Training seconds up to and including step ``until``: each logged step time counts for the
    steps it stands for (the gap to the previous logged step; the first logged step stands for
    min(step, gap to the next)), so ``--log-interval`` > 1 is counted right."""
    rows = sorted((s, ms) for s, ms in steps)
    seconds = 0.0
    for i, (step, ms) in enumerate(rows):
        if step > until:
            break
        if i == 0:
            span = min(step, rows[1][0] - step) if len(rows) > 1 else 1
        else:
            span = step - rows[i - 1][0]
        if _finite(ms):
            seconds += ms * max(span, 1) / 1000.0
    return seconds


def judge_convergence(steps: Sequence[Sequence[Any]], eval_losses: Mapping[int, float],
                      target_metric: str, target_value: float) -> Convergence | None:
    """``steps``: (step, elapsed_ms, loss) rows; ``eval_losses``: step -> validation loss.
    None when the check is off (target <= 0)."""
    if target_value is None or not target_value > 0:
        return None
    evals = sorted((int(s), float(v)) for s, v in eval_losses.items() if _finite(v))
    metric = target_metric if target_metric in METRIC_LABEL else ("eval_loss" if evals else "train_loss")
    timing = [(int(row[0]), row[1]) for row in steps]
    points = evals if metric == "eval_loss" else sorted((int(r[0]), float(r[2])) for r in steps if _finite(r[2]))
    final_step, final_value = points[-1] if points else (None, None)
    hit = next((s for s, v in points if v <= target_value), None)
    return Convergence(metric, float(target_value), final_value, final_step, hit,
                       seconds_until(timing, hit) if hit is not None else None, target_metric)


def convergence_row(data: Mapping[str, Any] | None, enforce: bool) -> MetricRow | None:
    """The metric-stage row for a recorded ``Convergence.to_dict()``; None when the check is off."""
    if not data:
        return None
    target, value, metric = data["target"], data["final_value"], data["metric"]
    expected = f"<= {target:g}"
    label = METRIC_LABEL.get(metric, metric)
    if value is None:
        why = ("the log has no 'validation loss at iteration' lines (eval never ran: set --eval-iters > 0 "
               "or convergence.target_metric to train_loss)" if metric == "eval_loss"
               else "the log has no finite training loss")
        return MetricRow(ROW, None, "loss", expected, "FAIL" if enforce else "RECORD", f"{ROW}: {why}")
    reached = value <= target
    where = f"final {label} {value:.4g} at step {data['final_step']}"
    when = (f"; reached at step {data['steps_to_target']} after {data['time_to_target_seconds']:.1f} s"
            if data.get("steps_to_target") is not None else "; never reached")
    if not enforce:
        return MetricRow(ROW, value, "loss", expected, "RECORD", f"record only: {where}{when}")
    verdict = "" if reached else f"{ROW}: {where} is above the target {target:g}{when}"
    return MetricRow(ROW, value, "loss", expected, "PASS" if reached else "FAIL",
                     verdict or f"{where} <= target {target:g}{when}")
