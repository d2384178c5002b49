"""PASS / FAIL / RECORD / SKIPPED per metric, from actual values and a threshold cell.

Rules (docs/product.md#metrics-and-passfail, docs/reference_suite.md#threshold-verdicts):

* enforcement off, or no cell / an empty cell: every actual becomes a RECORD row (expected text
  from its spec when one exists);
* otherwise every spec in the cell is evaluated, all violations are collected (no early stop):
  ``info`` -> RECORD; missing/None and ``optional`` -> SKIPPED; missing/None otherwise -> FAIL
  "missing"; a value that violates the spec -> FAIL; else PASS. Actuals the cell does not
  mention are RECORD rows ("no threshold defined").
* traps guarded: numeric strings are read as numbers, other strings and NaN fail with a reason,
  a negative ``tolerance_pct`` or a missing ``value`` is a spec error (FAIL), ``min_ratio`` with
  a missing, non-numeric or zero reference fails instead of dividing by zero.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from cvs_tasks.run.records import MetricRow

METRIC_UNITS: dict[str, str] = {
    "training.throughput_per_gpu": "TFLOP/s/GPU",
    "training.tflops_recomputed": "TFLOP/s/GPU",
    "training.tokens_per_gpu": "tok/s/GPU",
    "training.elapsed_time_per_iteration": "ms",
    "training.step_time_p50_ms": "ms",
    "training.step_time_p95_ms": "ms",
    "training.mem_usage": "ratio",
    "training.scaling_efficiency_pct": "%",
    "training.steps_to_target": "steps",
    "training.time_to_target_seconds": "s",
}
KINDS = ("min", "max", "max_ms", "min_tok_s", "within", "min_ratio", "info")


def unit_for(name: str) -> str:
    return METRIC_UNITS.get(name, "-")


def _fmt(v: Any) -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if math.isfinite(f) and f.is_integer() and abs(f) < 1e15:
        return str(int(f))
    return f"{f:.6g}"


def format_expected(spec: Any | None) -> str:
    """``>= v``, ``<= v``, ``<= v ms``, ``v +/-p%``, ``>= v x ref``, ``info (v)`` or ``-``."""
    if spec is None:
        return "-"
    kind, value = getattr(spec, "kind", None), getattr(spec, "value", None)
    if kind in ("min", "min_tok_s"):
        return f">= {_fmt(value)}"
    if kind == "max":
        return f"<= {_fmt(value)}"
    if kind == "max_ms":
        return f"<= {_fmt(value)} ms"
    if kind == "within":
        return f"{_fmt(value)} +/-{_fmt(getattr(spec, 'tolerance_pct', None))}%"
    if kind == "min_ratio":
        return f">= {_fmt(value)} x {getattr(spec, 'reference', None)}"
    if kind == "info":
        return f"info ({_fmt(value)})" if value is not None else "info"
    return f"{kind} {_fmt(value)}"


def as_number(value: Any) -> tuple[float | None, str | None]:
    """(number, None) or (None, why it is not a usable number); None input -> (None, None)."""
    if value is None:
        return None, None
    if isinstance(value, bool):
        return None, f"value {value!r} is not a number"
    if isinstance(value, (list, tuple)) and value:  # reference-style one-element lists
        value = value[-1]
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None, f"value {value!r} is not a number"
    if math.isnan(number):
        return None, "value is NaN"
    return number, None


def check(name: str, actual: float, spec: Any, actuals: Mapping[str, Any]) -> str | None:
    """The violation message for one numeric actual against one spec, or None when it passes."""
    kind = getattr(spec, "kind", None)
    if kind not in KINDS:
        return f"{name}: unknown threshold kind {kind!r} (use one of {', '.join(KINDS)})"
    limit, bad = as_number(getattr(spec, "value", None))
    if limit is None:
        return f"{name}: threshold spec has no numeric value ({bad or 'value missing'})"
    if kind in ("min", "min_tok_s") and actual < limit:
        return f"{name}: {_fmt(actual)} is below the minimum {_fmt(limit)}"
    if kind in ("max", "max_ms") and actual > limit:
        unit = " ms" if kind == "max_ms" else ""
        return f"{name}: {_fmt(actual)}{unit} is above the maximum {_fmt(limit)}{unit}"
    if kind == "within":
        pct, _ = as_number(getattr(spec, "tolerance_pct", None))
        if pct is None or pct < 0:
            return f"{name}: 'within' needs tolerance_pct >= 0 (got {getattr(spec, 'tolerance_pct', None)!r})"
        a, b = limit * (1 - pct / 100.0), limit * (1 + pct / 100.0)
        lo, hi = min(a, b), max(a, b)
        if not lo <= actual <= hi:
            return f"{name}: {_fmt(actual)} is outside {_fmt(limit)} +/-{_fmt(pct)}% [{_fmt(lo)}, {_fmt(hi)}]"
    if kind == "min_ratio":
        ref_name = getattr(spec, "reference", None)
        if not ref_name:
            return f"{name}: 'min_ratio' needs a reference metric"
        ref, why = as_number(actuals.get(ref_name))
        if ref is None or ref == 0:
            reason = why or ("is 0" if ref == 0 else "is missing")
            return f"{name}: reference {ref_name} {reason}; cannot compute the ratio"
        ratio = actual / ref
        if ratio < limit:
            return f"{name}: ratio {_fmt(ratio)} to {ref_name} is below {_fmt(limit)}"
    return None


def evaluate(actuals: Mapping[str, Any], cell: Mapping[str, Any] | None,
             enforce: bool) -> list[MetricRow]:
    """One MetricRow per metric (see the module docstring for the rules)."""
    public = {k: v for k, v in actuals.items() if not k.startswith("_")}
    if not enforce or not cell:
        why = "enforce_thresholds is false" if not enforce else "no threshold cell for this combo"
        rows = []
        for name, value in public.items():
            number, _ = as_number(value)
            spec = cell.get(name) if cell else None
            rows.append(MetricRow(name, number, unit_for(name), format_expected(spec), "RECORD",
                                  f"record only: {why}"))
        return rows
    rows = []
    for name, spec in cell.items():
        if name.startswith("_"):
            continue
        raw = public.get(name)
        number, bad = as_number(raw)
        expected, unit = format_expected(spec), unit_for(name)
        if getattr(spec, "kind", None) == "info":
            rows.append(MetricRow(name, number, unit, expected, "RECORD", "info only, not gated"))
        elif bad is not None:
            rows.append(MetricRow(name, None, unit, expected, "FAIL", f"{name}: {bad}"))
        elif number is None and getattr(spec, "optional", False):
            rows.append(MetricRow(name, None, unit, expected, "SKIPPED", "no value produced this run"))
        elif number is None:
            rows.append(MetricRow(name, None, unit, expected, "FAIL",
                                  f"{name}: missing from this run's results"))
        else:
            message = check(name, number, spec, public)
            rows.append(MetricRow(name, number, unit, expected, "FAIL" if message else "PASS",
                                  message or ""))
    for name, value in public.items():
        if name not in cell:
            number, _ = as_number(value)
            rows.append(MetricRow(name, number, unit_for(name), "-", "RECORD", "no threshold defined"))
    return rows
