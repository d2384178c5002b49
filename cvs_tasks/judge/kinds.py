"""Threshold kinds, one row each with the one small function that judges it, and the verdicts they
give: PASS / FAIL / RECORD / SKIPPED per metric, from actual values and a threshold cell.

A kind says how a metric's value is held against a spec: the fields it needs (and what a spec
without one is told), the fields it also reads, the report's expected text, whether the judge here
decides it, the run history does (``baseline``) or nobody does (``info``: recorded, never gated),
which metric direction calibration writes it for, and what a zero bound would always do (the
placeholder refusal). The config schema (``config.thresholds.ThresholdSpec``), the judge
(``evaluate``, below), the baseline gate (``history.baseline``) and calibration
(``history.calibrate``) read this table; adding a kind is one row and its function.

A unit is not part of a kind: a spec may state the unit of its bound (``unit``), which must be the
metric's. ``max_ms`` and ``min_tok_s``, which baked a unit into the name, are spellings of a kind
plus a unit (``SPELLINGS``): files that use them load and judge as before, and calibration still
writes them where they fit, so its files read as they always did.

The verdict rules (docs/product.md#metrics-and-passfail, docs/reference_suite.md#threshold-verdicts):

* enforcement off, or no cell / an empty cell: every actual becomes a RECORD row (expected text
  from its spec when one exists);
* otherwise every spec in the cell is evaluated, all violations are collected (no early stop):
  a kind that does not gate (``info``) -> RECORD; missing/None and ``optional`` -> SKIPPED;
  missing/None otherwise -> FAIL "missing"; a value that violates the spec -> FAIL; else PASS.
  Actuals the cell does not mention are RECORD rows ("no threshold defined"). Each kind's test
  is its function here; units come from the metric catalog.
* traps guarded: numeric strings are read as numbers, other strings and NaN fail with a reason,
  a negative ``tolerance_pct`` or a missing ``value`` is a spec error (FAIL), ``min_ratio`` with
  a missing, non-numeric or zero reference fails instead of dividing by zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from cvs_tasks.metrics import catalog
from cvs_tasks.run.records import MetricRow


def fmt(v: Any) -> str:
    """A bound or value as the verdict texts print it: integers without a point, else 6 digits."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if math.isfinite(f) and f.is_integer() and abs(f) < 1e15:
        return str(int(f))
    return f"{f:.6g}"


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


@dataclass(frozen=True)
class Bound:
    """What a kind's judge function is given: the actual, the spec's value as a number, the spec,
    the text after a number in the spec's unit (``" ms"`` or ``""``), and every actual of the combo."""

    actual: float
    value: float | None
    spec: Any
    unit: str
    actuals: Mapping[str, Any]


@dataclass(frozen=True)
class Kind:
    """One threshold kind. ``judge``: the violation text (None: passes); without one the kind is
    judged by the run history (``history``) or not at all (recorded only)."""

    name: str
    doc: str  # what it does, for the schema and the annotated templates
    needs: Mapping[str, str] = field(default_factory=dict)  # field -> what a spec without it is told it needs
    takes: tuple[str, ...] = ()  # further fields it reads when given
    judge: Callable[[Bound], str | None] | None = None
    expected: str = "{kind}"  # the report's Expected text (str.format: value, tolerance_pct, reference, unit, kind)
    check: Callable[[Any], list[str]] | None = None  # rules beyond ``needs``, on the whole spec
    history: bool = False  # judged against past runs by ``history.baseline``, not here
    calibrates: str | None = None  # calibration writes this kind for metrics whose better is this direction
    zero: str | None = None  # "pass" / "fail": what a bound of 0 would always do (a placeholder, refused)

    @property
    def gates(self) -> bool:
        return self.judge is not None or self.history


@dataclass(frozen=True)
class Spelling:
    """A kind name with a unit baked in, kept so the files that use it keep loading."""

    name: str
    kind: str
    unit: str


def _min(b: Bound) -> str | None:
    if b.actual < b.value:
        return f"{fmt(b.actual)}{b.unit} is below the minimum {fmt(b.value)}{b.unit}"
    return None


def _max(b: Bound) -> str | None:
    if b.actual > b.value:
        return f"{fmt(b.actual)}{b.unit} is above the maximum {fmt(b.value)}{b.unit}"
    return None


def _within(b: Bound) -> str | None:
    pct, _ = as_number(getattr(b.spec, "tolerance_pct", None))
    if pct is None or pct < 0:
        return f"'within' needs tolerance_pct >= 0 (got {getattr(b.spec, 'tolerance_pct', None)!r})"
    ends = b.value * (1 - pct / 100.0), b.value * (1 + pct / 100.0)
    lo, hi = min(ends), max(ends)
    if not lo <= b.actual <= hi:
        return (f"{fmt(b.actual)}{b.unit} is outside {fmt(b.value)}{b.unit} +/-{fmt(pct)}% "
                f"[{fmt(lo)}, {fmt(hi)}]")
    return None


def ratio_to_reference(b: Bound) -> tuple[float | None, str | None]:
    """(actual / the reference metric's actual, None) or (None, why it cannot be computed)."""
    ref_name = getattr(b.spec, "reference", None)
    if not ref_name:
        return None, f"'{b.spec.kind}' needs a reference metric"
    ref, why = as_number(b.actuals.get(ref_name))
    if ref is None or ref == 0:
        reason = why or ("is 0" if ref == 0 else "is missing")
        return None, f"reference {ref_name} {reason}; cannot compute the ratio"
    return b.actual / ref, None


def _min_ratio(b: Bound) -> str | None:
    ratio, why = ratio_to_reference(b)
    if ratio is None:
        return why
    if ratio < b.value:
        return f"ratio {fmt(ratio)} to {b.spec.reference} is below {fmt(b.value)}"
    return None


def _within_rules(spec: Any) -> list[str]:
    if spec.value is not None and spec.value < 0:
        return ["kind 'within' needs value >= 0 (a negative value inverts the band)"]
    return []


def _baseline_rules(spec: Any) -> list[str]:
    runs, min_runs = spec.runs, spec.min_runs
    if (runs is not None and runs < 1) or (min_runs is not None and min_runs < 1):
        return ["kind 'baseline' needs runs >= 1 and min_runs >= 1"]
    if runs is not None and min_runs is not None and min_runs > runs:
        return [f"kind 'baseline': min_runs ({min_runs}) cannot exceed runs ({runs})"]
    return []


VALUE = {"value": "a numeric value"}
KINDS: tuple[Kind, ...] = (
    Kind("min", "fail below value", VALUE, judge=_min, expected=">= {value}{unit}",
         calibrates=catalog.HIGHER, zero="pass"),
    Kind("max", "fail above value", VALUE, judge=_max, expected="<= {value}{unit}",
         calibrates=catalog.LOWER, zero="fail"),
    Kind("within", "fail outside value +/- tolerance_pct",
         {**VALUE, "tolerance_pct": "tolerance_pct >= 0 (percent either side of value)"},
         judge=_within, expected="{value}{unit} +/-{tolerance_pct}%", check=_within_rules, zero="fail"),
    Kind("min_ratio", "fail when actual / reference is below value",
         {**VALUE, "reference": "reference (the metric to divide by)"},
         judge=_min_ratio, expected=">= {value} x {reference}", zero="pass"),
    Kind("info", "recorded, never gated", takes=("value",), expected="info ({value})"),
    Kind("baseline", "against the median of past runs",
         {"tolerance_pct": "tolerance_pct >= 0 (how far from the median of past runs)"},
         takes=("runs", "min_runs"), expected="baseline", check=_baseline_rules, history=True),
)
SPELLINGS: tuple[Spelling, ...] = (Spelling("max_ms", "max", "ms"), Spelling("min_tok_s", "min", "tok/s/GPU"))
EXCLUSIVE = ("runs", "min_runs")
"""Fields refused on a kind that does not take them; any other field a kind does not read is
ignored there, as it always was."""
RULES: dict[str, Callable[[float], bool]] = {"tolerance_pct": lambda v: v >= 0}
"""Ranges a needed field must be in (else the spec is told what the kind needs)."""


def names() -> tuple[str, ...]:
    """Every kind name a spec may write: the kinds, then the spellings."""
    return tuple(k.name for k in KINDS) + tuple(s.name for s in SPELLINGS)


def resolve(name: Any, unit: str | None = None) -> tuple[Kind | None, str | None]:
    """(the kind, the unit the spec states) for a written kind name and ``unit`` field."""
    spelled = next((s for s in SPELLINGS if s.name == name), None)
    if spelled is not None:
        name, unit = spelled.kind, unit or spelled.unit
    return next((k for k in KINDS if k.name == name), None), unit


def spelled_unit(name: Any) -> str | None:
    """The unit a spelling bakes in (``max_ms`` -> ms), else None."""
    return next((s.unit for s in SPELLINGS if s.name == name), None)


def spelling(kind: str, unit: str | None) -> str:
    """The name calibration writes for ``kind`` in ``unit``: its spelling when one exists, else the kind."""
    return next((s.name for s in SPELLINGS if s.kind == kind and s.unit == unit), kind)


def for_direction(better: str | None) -> Kind | None:
    """The kind calibration writes for a metric whose better is ``better``."""
    return next((k for k in KINDS if better is not None and k.calibrates == better), None)


def judged_by_history(name: Any) -> bool:
    kind, _ = resolve(name)
    return kind is not None and kind.history


def problems(spec: Any) -> list[str]:
    """What is wrong with a spec, by its kind's row (an unknown kind is the schema's to refuse)."""
    kind, _ = resolve(spec.kind)
    if kind is None:
        return []
    wrong: list[str] = []
    baked = spelled_unit(spec.kind)
    if baked and spec.unit and spec.unit != baked:
        wrong.append(f"kind {spec.kind!r} states its bound in {baked}; for {spec.unit} write kind {kind.name!r} "
                     f"with unit {spec.unit!r}")
    stray = [f for f in EXCLUSIVE if getattr(spec, f, None) is not None and f not in kind.takes
             and f not in kind.needs]
    if stray:
        owners = " or ".join(repr(k.name) for k in KINDS if set(stray) & (set(k.takes) | set(k.needs)))
        wrong.append(f"{' and '.join(stray)} belong{'s' if len(stray) == 1 else ''} to kind {owners} only")
    for name, what in kind.needs.items():
        value = getattr(spec, name, None)
        if value is None or not RULES.get(name, lambda _: True)(value):
            wrong.append(f"kind {spec.kind!r} needs {what}")
    return wrong + (kind.check(spec) if kind.check else [])


def expected_text(spec: Any) -> str:
    """The report's Expected column for a spec: ``>= v``, ``<= v ms``, ``v +/-p%``, ``info (v)``, ..."""
    if spec is None:
        return "-"
    name, value = getattr(spec, "kind", None), getattr(spec, "value", None)
    kind, unit = resolve(name, getattr(spec, "unit", None))
    if kind is None:
        return f"{name} {fmt(value)}"
    if value is None and "value" not in kind.needs and "{value}" in kind.expected:
        return kind.name
    return kind.expected.format(value=fmt(value), tolerance_pct=fmt(getattr(spec, "tolerance_pct", None)),
                                reference=getattr(spec, "reference", None), unit=catalog.suffix(unit),
                                kind=kind.name)


def describe() -> str:
    """One line per kind and spelling, for the schema's description of ``kind``."""
    spelled = "; ".join(f"{s.name}: {s.kind} in {s.unit}" for s in SPELLINGS)
    return "; ".join(f"{k.name}: {k.doc}" for k in KINDS) + f"; {spelled}."


# --- the verdicts -------------------------------------------------------------------------------
def unit_for(name: str) -> str:
    """The metric's unit from the catalog (``-`` for a name it does not hold)."""
    return catalog.unit(name)


def format_expected(spec: Any | None) -> str:
    """``>= v``, ``<= v``, ``<= v ms``, ``v +/-p%``, ``>= v x ref``, ``info (v)`` or ``-`` (``kinds``)."""
    return expected_text(spec)


def check(name: str, actual: float, spec: Any, actuals: Mapping[str, Any]) -> str | None:
    """The violation message for one numeric actual against one spec (its kind's function), or None."""
    written = getattr(spec, "kind", None)
    kind, unit = resolve(written, getattr(spec, "unit", None))
    if kind is None:
        here = [n for n in names() if not judged_by_history(n)]
        return f"{name}: unknown threshold kind {written!r} (use one of {', '.join(here)})"
    if kind.history:
        return f"{name}: kind {written!r} is judged against the run history (history.baseline), not here"
    if kind.judge is None:
        return None
    limit, bad = as_number(getattr(spec, "value", None))
    if limit is None and "value" in kind.needs:
        return f"{name}: threshold spec has no numeric value ({bad or 'value missing'})"
    message = kind.judge(Bound(actual, limit, spec, catalog.suffix(unit), actuals))
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
        kind, _ = resolve(getattr(spec, "kind", None))
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
