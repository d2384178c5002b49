from dataclasses import dataclass

import pytest

from cvs_tasks.judge.kinds import evaluate, format_expected


@dataclass
class Spec:
    kind: str
    value: object = None
    optional: bool = False
    tolerance_pct: float | None = None
    reference: str | None = None


def by_name(rows):
    return {r.name: r for r in rows}


def test_each_kind_passes_and_fails():
    cell = {
        "training.throughput_per_gpu": Spec("min", 100),
        "training.tokens_per_gpu": Spec("min_tok_s", 1000),
        "training.elapsed_time_per_iteration": Spec("max_ms", 500),
        "training.mem_usage": Spec("max", 0.85),
        "training.step_time_p50_ms": Spec("within", 200, tolerance_pct=10),
        "training.step_time_p95_ms": Spec("min_ratio", 1.0, reference="training.step_time_p50_ms"),
    }
    good = {"training.throughput_per_gpu": 120.0, "training.tokens_per_gpu": 1000.0,
            "training.elapsed_time_per_iteration": 500.0, "training.mem_usage": 0.5,
            "training.step_time_p50_ms": 219.0, "training.step_time_p95_ms": 230.0}
    assert {r.status for r in evaluate(good, cell, True)} == {"PASS"}
    bad = {"training.throughput_per_gpu": 99.0, "training.tokens_per_gpu": 999.9,
           "training.elapsed_time_per_iteration": 500.1, "training.mem_usage": 0.9,
           "training.step_time_p50_ms": 221.0, "training.step_time_p95_ms": 200.0}
    rows = evaluate(bad, cell, True)
    assert {r.status for r in rows} == {"FAIL"}
    assert sum(r.status == "FAIL" for r in rows) == 6  # every violation collected


def test_missing_optional_info_and_unlisted():
    cell = {"training.throughput_per_gpu": Spec("min", 100),
            "training.mem_usage": Spec("max", 0.85, optional=True),
            "training.scaling_efficiency_pct": Spec("info", 85.0, optional=True),
            "training.steps_to_target": Spec("info", 10)}
    rows = by_name(evaluate({"training.mem_usage": None, "training.step_time_p50_ms": 5.0,
                             "_loss_curve": [[1, 2]]}, cell, True))
    assert rows["training.throughput_per_gpu"].status == "FAIL"
    assert "missing" in rows["training.throughput_per_gpu"].reason
    assert rows["training.mem_usage"].status == "SKIPPED"
    assert rows["training.scaling_efficiency_pct"].status == "RECORD"
    assert rows["training.steps_to_target"].status == "RECORD"
    assert rows["training.step_time_p50_ms"].status == "RECORD"
    assert rows["training.step_time_p50_ms"].expected == "-"
    assert "_loss_curve" not in rows


def test_optional_value_present_is_still_gated():
    rows = evaluate({"training.mem_usage": 0.9}, {"training.mem_usage": Spec("max", 0.85, optional=True)}, True)
    assert rows[0].status == "FAIL"


@pytest.mark.parametrize("enforce, cell", [(False, {"training.throughput_per_gpu": Spec("min", 100)}),
                                           (True, None), (True, {})])
def test_record_only_when_not_enforcing_or_no_cell(enforce, cell):
    rows = evaluate({"training.throughput_per_gpu": 1.0, "training.mem_usage": "0.5"}, cell, enforce)
    assert [(r.name, r.status) for r in rows] == [("training.throughput_per_gpu", "RECORD"),
                                                  ("training.mem_usage", "RECORD")]
    assert rows[1].value == 0.5
    if cell:
        assert rows[0].expected == ">= 100"


def test_traps():
    rows = by_name(evaluate(
        {"a": "12.5", "b": "fast", "c": 10.0, "d": 5.0, "ref0": 0.0, "e": 5.0, "f": float("nan"),
         "g": 1.0},
        {"a": Spec("min", "10"), "b": Spec("min", 1), "c": Spec("within", 10, tolerance_pct=-5),
         "d": Spec("min_ratio", 0.5, reference="ref0"), "e": Spec("min_ratio", 0.5, reference="nope"),
         "f": Spec("min", 1), "g": Spec("between", 1)}, True))
    assert rows["a"].status == "PASS" and rows["a"].value == 12.5
    assert rows["b"].status == "FAIL" and "not a number" in rows["b"].reason
    assert rows["c"].status == "FAIL" and "tolerance_pct" in rows["c"].reason
    assert rows["d"].status == "FAIL" and "is 0" in rows["d"].reason
    assert rows["e"].status == "FAIL" and "missing" in rows["e"].reason
    assert rows["f"].status == "FAIL" and "NaN" in rows["f"].reason
    assert rows["g"].status == "FAIL" and "unknown threshold kind" in rows["g"].reason


def test_within_with_negative_reference_value():
    rows = evaluate({"x": -95.0}, {"x": Spec("within", -100, tolerance_pct=10)}, True)
    assert rows[0].status == "PASS"


@pytest.mark.parametrize("spec, text", [
    (Spec("min", 100), ">= 100"), (Spec("min_tok_s", 6500.5), ">= 6500.5"), (Spec("max", 0.85), "<= 0.85"),
    (Spec("max_ms", 12000.0), "<= 12000 ms"), (Spec("within", 500, tolerance_pct=5), "500 +/-5%"),
    (Spec("min_ratio", 0.9, reference="training.tokens_per_gpu"), ">= 0.9 x training.tokens_per_gpu"),
    (Spec("info", 85.0), "info (85)"), (None, "-"),
])
def test_expected_text(spec, text):
    assert format_expected(spec) == text


def test_units_elapsed_is_milliseconds():
    row = evaluate({"training.elapsed_time_per_iteration": 1.0}, None, False)[0]
    assert row.unit == "ms"
