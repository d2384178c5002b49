"""The kind table: a unit is stated, not baked into a kind; the old unit-named kinds are spellings
that load, judge and calibrate exactly as before."""

from __future__ import annotations

import json

import pytest

from cvs_tasks.config.thresholds import ThresholdSpec, load_threshold_file
from cvs_tasks.history.calibrate import calibrated_kind
from cvs_tasks.judge import kinds
from cvs_tasks.judge.kinds import evaluate
from cvs_tasks.metrics import catalog

STEP, TOKENS, MEM = "training.elapsed_time_per_iteration", "training.tokens_per_gpu", "training.mem_usage"
CELL = "MBS=4,GBS=128,PRECISION=FP8"


def rows(spec, name, value):
    return [(r.expected, r.status, r.reason) for r in evaluate({name: value}, {name: spec}, True)]


@pytest.mark.parametrize("spelled, stated, name, good, bad", [
    ({"kind": "max_ms", "value": 12000}, {"kind": "max", "value": 12000, "unit": "ms"}, STEP, 11999.0, 12000.5),
    ({"kind": "min_tok_s", "value": 6500}, {"kind": "min", "value": 6500, "unit": "tok/s/GPU"}, TOKENS, 6500, 6499),
])
def test_a_spelled_kind_is_its_kind_plus_a_unit(spelled, stated, name, good, bad):
    spelled, stated = ThresholdSpec.model_validate(spelled), ThresholdSpec.model_validate(stated)
    assert spelled.stated_unit() == stated.stated_unit() == catalog.unit(name)
    for value in (good, bad):
        assert rows(spelled, name, value) == rows(stated, name, value)
    assert rows(spelled, name, bad)[0][1] == "FAIL"


def test_the_messages_of_the_spelled_kinds_are_unchanged():
    assert rows(ThresholdSpec(kind="max_ms", value=12000), STEP, 12500.0) == [
        ("<= 12000 ms", "FAIL", f"{STEP}: 12500 ms is above the maximum 12000 ms")]
    assert rows(ThresholdSpec(kind="min_tok_s", value=6500), TOKENS, 6000.0) == [
        (">= 6500", "FAIL", f"{TOKENS}: 6000 is below the minimum 6500")]
    assert rows(ThresholdSpec(kind="max", value=0.85), MEM, 0.9) == [
        ("<= 0.85", "FAIL", f"{MEM}: 0.9 is above the maximum 0.85")]


def test_a_stated_unit_must_be_the_metrics_a_spelled_one_only_warns(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({CELL: {MEM: {"kind": "max_ms", "value": 1}, STEP: {"kind": "max", "value": 1,
                                                                                  "unit": "s"}}}))
    cells, _, problems, warnings = load_threshold_file(path)
    assert problems == [(f'["{CELL}"]["{STEP}"].unit', f"{STEP} is in ms, not s: state the metric's unit")]
    assert MEM in cells[CELL] and len(warnings) == 1
    assert "kind 'max_ms' states its bound in ms, but training.mem_usage is in ratio" in warnings[0]
    with pytest.raises(ValueError, match="kind 'max_ms' states its bound in ms; for s write kind 'max'"):
        ThresholdSpec(kind="max_ms", value=1, unit="s")
    with pytest.raises(ValueError, match="unknown unit 'sec'"):
        ThresholdSpec(kind="max", value=1, unit="sec")


def test_calibration_writes_the_kinds_it_always_wrote():
    assert {m.name: calibrated_kind(m) for m in catalog.calibrated()} == {
        "training.throughput_per_gpu": "min", TOKENS: "min_tok_s", STEP: "max_ms",
        "training.step_time_p95_ms": "max_ms", MEM: "max"}


def test_the_table_is_consistent():
    names = kinds.names()
    assert len(names) == len(set(names))
    assert all(kinds.resolve(s.name)[0] is not None and s.unit in catalog.units() for s in kinds.SPELLINGS)
    for kind in kinds.KINDS:
        assert kind.judge is None or not kind.history, kind.name  # one judge per kind
        assert set(kind.needs) | set(kind.takes) <= set(ThresholdSpec.model_fields), kind.name
    assert [k.name for k in kinds.KINDS if not k.gates] == ["info"]
    assert [k.name for k in kinds.KINDS if k.history] == ["baseline"]
