"""The metric catalog: every run metric the harness produces, judges or names, declared once.

A metric is one ``Metric`` row: its name, unit, which way is better, the note the annotated
templates print, where its value comes from, its launcher-summary label, and its roles
(calibrated by ``thresholds.calibrate``, a speed gate for ``diagnose.auto``). Every other table
is derived from ``METRICS``: the threshold file's known names and notes (``config.thresholds``),
units and the band side of a baseline (``judge``, ``history``), the bounds calibration writes,
the run statistics ``runstats`` computes, the summary lines ``lines`` reads, the speed gates.

Log labels: the grammar (``grammar``'s per-dialect tables) is the source of which printed label
fills which iteration-line *field* (``tflops``, ``ms``, ``grad_norm``, ...), for metrics and
non-metrics alike. A metric read from iteration lines names its ``field`` and the ``statistic``
taken over the steady-state values of it; ``log_labels`` shows the labels per dialect that
feed it. So a metric over a field the grammar already reads is one row here; a new printed label
is one row in the grammar's dialect table.

Derived tables are read through the functions below at call time, so a row added to ``METRICS``
(also a test's throw-away row) reaches every consumer.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

HIGHER, LOWER = "higher", "lower"
MEAN, HARMONIC_MEAN, P50, P95 = "mean", "harmonic_mean", "p50", "p95"
STATISTICS = (MEAN, HARMONIC_MEAN, P50, P95)
"""How steady-state field values become a run metric (``runstats`` implements each and gives the reasons)."""

UNIT_SUFFIX = {"ms": " ms", "s": " s", "%": "%"}
"""The text a threshold's expected value and messages print after a number in a unit the spec
states; rate units (TFLOP/s/GPU, tok/s/GPU) and ratios print none (the report's Unit column names them)."""


@dataclass(frozen=True)
class Metric:
    """One run metric. ``better``: HIGHER / LOWER, or None when neither (a band on both sides)."""

    name: str
    unit: str
    note: str
    better: str | None = None
    field: str | None = None  # the grammar field this is a statistic of (None: set from the training record)
    statistic: str | None = None  # one of STATISTICS, over the steady-state values of ``field``
    positive_only: bool = True  # values <= 0 are not measurements (rates, times) and are left out
    summary_label: str | None = None  # the ROCm launcher's summary line label (lower case), e.g. "tokens/gpu/s"
    calibrate: bool = False  # ``thresholds.calibrate`` writes a bound for it
    optional: bool = False  # not every backend produces it: a calibrated spec says optional
    speed_gate: bool = False  # a FAIL of it on a distributed combo starts ``diagnose.auto``


METRICS: tuple[Metric, ...] = (
    Metric("training.throughput_per_gpu", "TFLOP/s/GPU",
           "TFLOP/s per GPU: harmonic mean of the steady-state steps.",
           HIGHER, "tflops", HARMONIC_MEAN, summary_label="throughput per gpu", calibrate=True, speed_gate=True),
    Metric("training.tokens_per_gpu", "tok/s/GPU",
           "Tokens per second per GPU: harmonic mean of the steady-state steps.",
           HIGHER, "tokens", HARMONIC_MEAN, summary_label="tokens/gpu/s", calibrate=True, speed_gate=True),
    Metric("training.elapsed_time_per_iteration", "ms", "Step time in ms: mean of the steady-state steps.",
           LOWER, "ms", MEAN, summary_label="elapsed time per iteration", calibrate=True, speed_gate=True),
    Metric("training.mem_usage", "ratio",
           "GPU memory in use, ratio 0-1 (ROCm 'mem usages:', Primus hip usage_ratio). "
           "Primus: recorded, not gated by an optional spec; write optional = false to gate it.",
           LOWER, "mem", MEAN, positive_only=False, summary_label="mem usages", calibrate=True, optional=True),
    Metric("training.scaling_efficiency_pct", "%",
           "Multi-node scaling efficiency in % against scaling_baseline (distributed only).",
           HIGHER, speed_gate=True),
    Metric("training.steps_to_target", "steps", "First step whose loss reached convergence.target_value.", LOWER),
    Metric("training.time_to_target_seconds", "s", "Training seconds until that step.", LOWER),
    Metric("training.step_time_p50_ms", "ms", "Median step time in ms.", LOWER, "ms", P50),
    Metric("training.step_time_p95_ms", "ms", "95th percentile step time in ms.", LOWER, "ms", P95, calibrate=True),
    Metric("training.lm_loss", "-", "Language-model loss: mean of the steady-state steps.", LOWER, "loss", MEAN),
    Metric("training.grad_norm", "-", "Gradient norm: mean of the steady-state steps.", LOWER, "grad_norm", MEAN),
    Metric("training.tflops_recomputed", "TFLOP/s/GPU",
           "TFLOP/s per GPU recomputed from tokens/s with the harness's FLOPs formula.", HIGHER, speed_gate=True),
)


@lru_cache(maxsize=8)
def _index(rows: tuple[Metric, ...]) -> dict[str, Metric]:
    return {m.name: m for m in rows}


def get(name: str) -> Metric | None:
    """The row of ``name``, or None for a name the harness does not know."""
    return _index(METRICS).get(name)


def names() -> tuple[str, ...]:
    """Every metric a threshold cell may name, in catalog order."""
    return tuple(m.name for m in METRICS)


def unit(name: str) -> str:
    """The metric's unit; ``-`` for a name the catalog does not hold."""
    row = get(name)
    return row.unit if row else "-"


def better(name: str) -> str | None:
    row = get(name)
    return row.better if row else None


def notes() -> dict[str, str]:
    return {m.name: m.note for m in METRICS}


def from_lines() -> tuple[Metric, ...]:
    """The metrics ``runstats`` computes from iteration lines, in catalog order."""
    return tuple(m for m in METRICS if m.field is not None)


def calibrated() -> tuple[Metric, ...]:
    return tuple(m for m in METRICS if m.calibrate)


def speed_gates() -> frozenset[str]:
    return frozenset(m.name for m in METRICS if m.speed_gate)


def summary_labels() -> dict[str, str]:
    """metric -> the ROCm launcher's summary label for it, in catalog order."""
    return {m.name: m.summary_label for m in METRICS if m.summary_label}


def units() -> frozenset[str]:
    """Every unit a threshold spec may state: the units of the catalog's metrics (``-`` is none)."""
    return (frozenset(m.unit for m in METRICS) | frozenset(UNIT_SUFFIX)) - {"-"}


def suffix(unit_name: str | None) -> str:
    return UNIT_SUFFIX.get(unit_name or "", "")


def log_labels(name: str) -> dict[str, tuple[str, ...]]:
    """dialect -> the printed labels (lower case) that fill the metric's field; {} when it is not read from lines."""
    from cvs_tasks.metrics.grammar import DIALECT_LABELS

    row = get(name)
    if row is None or row.field is None:
        return {}
    found = {dialect: tuple(label for label, (field, _) in table.items() if field == row.field)
             for dialect, table in DIALECT_LABELS.items()}
    return {dialect: labels for dialect, labels in found.items() if labels}
