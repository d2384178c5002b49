"""PASS / FAIL / RECORD / SKIPPED per metric, from actual values and a threshold cell.

Rules (docs/product.md#metrics-and-passfail, docs/reference_suite.md#threshold-verdicts):

* enforcement off, or no cell / an empty cell: every actual becomes a RECORD row (expected text
  from its spec when one exists);
* otherwise every spec in the cell is evaluated, all violations are collected (no early stop):
  a kind that does not gate (``info``) -> RECORD; missing/None and ``optional`` -> SKIPPED;
  missing/None otherwise -> FAIL "missing"; a value that violates the spec -> FAIL; else PASS.
  Actuals the cell does not mention are RECORD rows ("no threshold defined"). Each kind's test
  is its function in ``kinds``; units come from the metric catalog.
* traps guarded: numeric strings are read as numbers, other strings and NaN fail with a reason,
  a negative ``tolerance_pct`` or a missing ``value`` is a spec error (FAIL), ``min_ratio`` with
  a missing, non-numeric or zero reference fails instead of dividing by zero.
"""

from __future__ import annotations

from typing import Any, Mapping

from cvs_tasks.judge import kinds
from cvs_tasks.judge.kinds import as_number
from cvs_tasks.metrics import catalog
from cvs_tasks.run.records import MetricRow

__all__ = ["as_number", "check", "evaluate", "format_expected", "unit_for"]


def unit_for(name: str) -> str:
    """The metric's unit from the catalog (``-`` for a name it does not hold)."""
    return catalog.unit(name)


def format_expected(spec: Any | None) -> str:
    """``>= v``, ``<= v``, ``<= v ms``, ``v +/-p%``, ``>= v x ref``, ``info (v)`` or ``-`` (``kinds``)."""
    return kinds.expected_text(spec)


def check(name: str, actual: float, spec: Any, actuals: Mapping[str, Any]) -> str | None:
    """The violation message for one numeric actual against one spec (its kind's function), or None."""
    written = getattr(spec, "kind", None)
    kind, unit = kinds.resolve(written, getattr(spec, "unit", None))
    if kind is None:
        here = [n for n in kinds.names() if not kinds.judged_by_history(n)]
        return f"{name}: unknown threshold kind {written!r} (use one of {', '.join(here)})"
    if kind.history:
        return f"{name}: kind {written!r} is judged against the run history (history.baseline), not here"
    if kind.judge is None:
        return None
    limit, bad = as_number(getattr(spec, "value", None))
    if limit is None and "value" in kind.needs:
        return f"{name}: threshold spec has no numeric value ({bad or 'value missing'})"
    message = kind.judge(kinds.Bound(actual, limit, spec, catalog.suffix(unit), actuals))
    return f"{name}: {message}" if message else None


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
        kind, _ = kinds.resolve(getattr(spec, "kind", None))
        if kind is not None and not kind.gates:
            rows.append(MetricRow(name, number, unit, expected, "RECORD", f"{kind.name} only, not gated"))
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
