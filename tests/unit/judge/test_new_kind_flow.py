"""Adding a threshold kind is one row and one function: a throw-away ``max_ratio`` (fail when
actual / reference is above value, e.g. a step-time jitter gate p95 / p50) is accepted by the
config schema, judged, shown in the report with its bound and refused as a zero placeholder."""

from __future__ import annotations

import pytest
from judged_run import BF16, FP8, judged_demo_run, report_row, threshold_file

from cvs_tasks.config.thresholds import ThresholdSpec, load_threshold_file
from cvs_tasks.history.calibrate import placeholder_problems
from cvs_tasks.judge import kinds

P95, P50 = "training.step_time_p95_ms", "training.step_time_p50_ms"


def _max_ratio(b: kinds.Bound) -> str | None:
    ratio, why = kinds.ratio_to_reference(b)
    if ratio is None:
        return why
    return f"ratio {kinds.fmt(ratio)} to {b.spec.reference} is above {kinds.fmt(b.value)}" if ratio > b.value else None


MAX_RATIO = kinds.Kind("max_ratio", "fail when actual / reference is above value",
                       {"value": "a numeric value", "reference": "reference (the metric to divide by)"},
                       judge=_max_ratio, expected="<= {value} x {reference}", zero="fail")


@pytest.fixture
def one_more_kind(monkeypatch):
    monkeypatch.setattr(kinds, "KINDS", kinds.KINDS + (MAX_RATIO,))


def jitter(value, reference=P50):
    return {P95: {"kind": "max_ratio", "value": value, **({"reference": reference} if reference else {})}}


def test_without_the_row_the_kind_is_refused_with_a_hint(tmp_path):
    _, _, problems, _ = load_threshold_file(threshold_file(tmp_path, {BF16: jitter(1.05)}))
    assert dict(problems)[f'["{BF16}"]["{P95}"].kind'].startswith(
        "unknown threshold kind 'max_ratio' (did you mean 'min_ratio'?); use one of min, max, ")


def test_the_schema_takes_it_and_asks_for_what_its_row_needs(tmp_path, one_more_kind):
    cells, _, problems, _ = load_threshold_file(threshold_file(tmp_path, {BF16: jitter(1.05), FP8: jitter(1.05, None)}))
    assert cells[BF16][P95].kind == "max_ratio"
    assert dict(problems) == {f'["{FP8}"]["{P95}"]': "kind 'max_ratio' needs reference (the metric to divide by)"}
    zero = {BF16: {P95: ThresholdSpec(kind="max_ratio", value=0, reference=P50)}}
    assert placeholder_problems(zero, "t.json") == [
        f"t.json: {BF16}.{P95}: value 0 is a placeholder, not a measured bound (kind 'max_ratio' would always fail)"]


def test_it_is_judged_and_reported_with_its_bound(tmp_path, one_more_kind):
    results, records, html = judged_demo_run(tmp_path, {BF16: jitter(1.05), FP8: jitter(1.001)})
    passed, failed = report_row(results, BF16, P95), report_row(results, FP8, P95)
    assert (passed["status"], passed["expected"], passed["value"]) == ("PASS", f"<= 1.05 x {P50}", 14000.0)
    assert failed["status"] == "FAIL" and failed["expected"] == f"<= 1.001 x {P50}"
    assert failed["reason"] == f"{P95}: ratio {14000 / 13900:.6g} to {P50} is above 1.001"
    assert P95 in records[FP8].reason and "&lt;= 1.001 x training.step_time_p50_ms" in html
