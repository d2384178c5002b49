"""The run metrics as ROCm CVS (the reference) aggregates them, shown as RECORD rows next to ours.

Teams whose thresholds were calibrated on the reference see both numbers and the difference.
Ours are steady-state statistics (``metrics.runstats``: warm-up 10 % dropped, harmonic means of
rates); the reference's (docs/reference_suite.md#run-metrics) are:

* Megatron-LM: the ROCm launcher's summary lines (``throughput per GPU:``, ``tokens/GPU/s:``,
  ``elapsed time per iteration:``, ``mem usages:``; the launcher averages steps 3..N-1), else the
  per-step values of the whole log with the first step dropped, arithmetic mean. Without the
  summary line it has no tokens/s (Megatron prints none per step).
* Primus: the backend's own running average (the Y of ``X/Y``) of the last step printed, else the
  last single value; no ``mem_usage`` at all.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from cvs_tasks import backends
from cvs_tasks.metrics import catalog
from cvs_tasks.run.records import MetricRow

SUFFIX = " (ROCm CVS)"
SUMMARY_LABELS = catalog.summary_labels()  # metric -> ROCm launcher summary label (``LineFacts.launcher_summary`` keys)
STEP_FIELDS = {"training.throughput_per_gpu": "tflops", "training.elapsed_time_per_iteration": "elapsed_ms",
               "training.mem_usage": "mem_ratio"}
PRIMUS_FIELDS = {"training.throughput_per_gpu": ("tflops_avg", "tflops"),
                 "training.tokens_per_gpu": ("tokens_avg", None),
                 "training.elapsed_time_per_iteration": ("elapsed_avg_ms", "elapsed_ms")}


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def reference_numbers(iterations: Sequence[Any], summary: Mapping[str, float],
                      backend: str, dialect: str | None = None) -> dict[str, dict[str, Any]]:
    """metric -> {"value": number or None, "how": how the reference got it}; ``iterations`` in step
    order (objects with the ``Iteration`` fields), ``summary`` the launcher summary lines.

    The aggregation is the backend's (``Backend.reference_numbers``); a log read in another
    backend's dialect than the run's (``dialect``, as the parser found it) is aggregated as that
    backend's logs are."""
    run = backends.get(backend)
    chosen = run if dialect in (None, run.dialect) else (backends.for_dialect(dialect) or run)
    return chosen.reference_numbers(iterations, summary)


def megatron_numbers(iterations: Sequence[Any], summary: Mapping[str, float]) -> dict[str, dict[str, Any]]:
    """The reference's Megatron-LM aggregation: the launcher's summary lines, else the mean per step."""
    return {metric: _megatron(iterations, summary, metric) for metric in SUMMARY_LABELS}


def primus_numbers(iterations: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """The reference's Primus aggregation: the running average of the last step, else its value."""
    return {metric: _primus(iterations, metric) for metric in SUMMARY_LABELS}


def _megatron(iterations: Sequence[Any], summary: Mapping[str, float], metric: str) -> dict[str, Any]:
    label = SUMMARY_LABELS[metric]
    printed = label.replace("gpu", "GPU")  # as the launcher prints it
    if _finite(summary.get(label)):
        return {"value": float(summary[label]), "how": f"launcher summary line '{printed}:'"}
    field = STEP_FIELDS.get(metric)
    values = [getattr(it, field) for it in iterations] if field else []
    values = [float(v) for v in values if _finite(v)]
    if not values:
        return {"value": None, "how": f"no '{printed}:' summary line and no per-step value"}
    used = values[1:] if len(values) > 1 else values
    return {"value": sum(used) / len(used),
            "how": f"mean of {len(used)} logged steps after the first (no summary line)"}


def _primus(iterations: Sequence[Any], metric: str) -> dict[str, Any]:
    if metric not in PRIMUS_FIELDS:
        return {"value": None, "how": "the reference reports no mem_usage for Primus"}
    average, single = PRIMUS_FIELDS[metric]
    for field, how in ((average, "running average (Y of X/Y) of the last step"),
                       (single, "value of the last step (no X/Y pair)")):
        if field is None:
            continue
        values = [getattr(it, field) for it in iterations if _finite(getattr(it, field))]
        if values:
            return {"value": float(values[-1]), "how": how}
    return {"value": None, "how": "not in the log"}


def with_reference_rows(rows: list[MetricRow], reference: Mapping[str, Mapping[str, Any]] | None,
                        unit_for) -> list[MetricRow]:
    """``rows`` with a RECORD row of the reference's number after our row of each metric."""
    if not reference:
        return rows
    ours = {row.name: row for row in rows}
    out: list[MetricRow] = []
    pending = dict(reference)
    for row in rows:
        out.append(row)
        if row.name in pending:
            out.append(_row(row.name, pending.pop(row.name), ours.get(row.name), unit_for))
    out += [_row(name, ref, None, unit_for) for name, ref in pending.items()]
    return out


def _row(metric: str, ref: Mapping[str, Any], ours: MetricRow | None, unit_for) -> MetricRow:
    value = ref.get("value")
    reason = f"info: the reference's aggregation, {ref.get('how', '')}"
    if _finite(value) and ours is not None and _finite(ours.value) and ours.value:
        reason += f"; {100.0 * (value - ours.value) / ours.value:+.1f} % vs ours"
    return MetricRow(metric + SUFFIX, value if _finite(value) else None, unit_for(metric), "-", "RECORD", reason)
