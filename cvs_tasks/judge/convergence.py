"""Convergence (docs/product.md#convergence): the FINAL loss judged against a target.

``convergence.target_value > 0`` turns the check on (<= 0: off). ``target_metric`` picks the loss:
``train_loss``, ``eval_loss`` (the ``validation loss at iteration N`` lines), or ``auto`` — the
eval loss when the run evaluated, else the training loss. The last value of that loss passes
when it is <= the target; the row is PASS/FAIL when ``enforce_thresholds`` is true, else RECORD.
Steps-to-target (the first step whose loss reached the target) and time-to-target (training
seconds up to it) are recorded either way. The reference took the first step that reached the
target, judged nothing, and never saw eval loss (docs/reference_suite.md#convergence).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

from cvs_tasks.run.records import MetricRow

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


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


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
