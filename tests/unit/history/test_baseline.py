"""The `baseline` kind: within X % of the median of the last N PASS runs; RECORD while too short."""

from __future__ import annotations

import pytest

from cvs_tasks.config.thresholds import ThresholdSpec
from cvs_tasks.history import entry_from_run, record_run
from cvs_tasks.history.baseline import BaselineSettings, GateContext, baseline_rows, judge, merge_rows, split_cell
from cvs_tasks.judge.kinds import evaluate, unit_for
from tests.unit.history.damage import DAMAGE, damage, healthy_bytes, root_ignores_permissions
from tests.unit.history.runs import COMBO, make_run

TPUT = "training.throughput_per_gpu"
STEP = "training.elapsed_time_per_iteration"


def past(*values):
    return [(f"r{i}", v) for i, v in enumerate(values)]


def test_too_short_a_history_is_recorded_with_the_reason():
    v = judge(TPUT, 100.0, past(100, 101), BaselineSettings(10, runs=5, min_runs=3))
    assert v.status == "RECORD" and "2 of the 3 PASS runs" in v.reason


def test_throughput_fails_only_below_the_band_and_step_time_only_above():
    s = BaselineSettings(10, runs=5, min_runs=3)
    assert judge(TPUT, 89.0, past(100, 100, 100), s).status == "FAIL"
    assert judge(TPUT, 91.0, past(100, 100, 100), s).status == "PASS"
    assert judge(TPUT, 150.0, past(100, 100, 100), s).status == "PASS"  # faster is never a regression
    assert judge(STEP, 111.0, past(100, 100, 100), s).status == "FAIL"
    assert judge(STEP, 50.0, past(100, 100, 100), s).status == "PASS"


def test_the_median_of_the_last_n_is_robust_to_one_odd_run():
    v = judge(TPUT, 95.0, past(10, 100, 101, 5, 99, 100, 102), BaselineSettings(10, runs=5, min_runs=3))
    assert v.median == 100 and v.used == ("r2", "r3", "r4", "r5", "r6") and v.status == "PASS"
    fail = judge(TPUT, 80.0, past(100, 100, 100), BaselineSettings(10))
    assert fail.status == "FAIL" and "-20.0%" in fail.reason and "median 100" in fail.reason


def test_spec_validation_names_what_is_missing():
    with pytest.raises(ValueError, match="tolerance_pct"):
        ThresholdSpec(kind="baseline")
    with pytest.raises(ValueError, match="min_runs"):
        ThresholdSpec(kind="baseline", tolerance_pct=5, runs=2, min_runs=3)
    with pytest.raises(ValueError, match="baseline"):
        ThresholdSpec(kind="min", value=1, runs=3)
    assert ThresholdSpec(kind="baseline", tolerance_pct=5).value is None


def test_the_gate_reads_pass_runs_of_this_config_on_this_cluster(tmp_path):
    root, db = tmp_path / "reports", tmp_path / "reports" / "history.sqlite"
    for i, (tput, status) in enumerate([(500, "PASS"), (502, "PASS"), (300, "FAIL"), (498, "PASS")]):
        record_run(db, entry_from_run(make_run(root, f"r{i}", created=10.0 + i, tput=tput, metric_status=status)))
    record_run(db, entry_from_run(make_run(root, "other", created=13.5, tput=100, hosts=["10.0.0.9"])))
    this = entry_from_run(make_run(root, "now", created=20.0, tput=400))
    ctx = GateContext(db, this.config_hash, this.cluster, "now", 20.0)
    cell = {TPUT: ThresholdSpec(kind="baseline", tolerance_pct=10, min_runs=3),
            STEP: ThresholdSpec(kind="max_ms", value=2000)}
    fixed, base = split_cell(cell)
    assert list(fixed) == [STEP] and list(base) == [TPUT]
    actuals = {TPUT: 400.0, STEP: 1600.0}
    rows = merge_rows(evaluate(actuals, fixed, True),
                      baseline_rows(ctx, COMBO, actuals, base, True, lambda _: None, unit_for))
    by = {r.name: r for r in rows}
    assert len(rows) == 2 and by[STEP].status == "PASS"
    assert by[TPUT].status == "FAIL" and "median 500" in by[TPUT].reason
    off = baseline_rows(ctx, COMBO, actuals, base, False, lambda _: None, unit_for)
    assert off[0].status == "RECORD" and "enforce_thresholds is false" in off[0].reason


@pytest.mark.parametrize("kind", DAMAGE)
def test_an_unreadable_history_records_the_baseline_metric_and_warns(tmp_path, kind):
    if kind == "permission" and root_ignores_permissions():
        pytest.skip("root reads a mode-000 file")
    db = damage(tmp_path / "h.sqlite", kind, healthy_bytes(tmp_path))
    warnings = []
    rows = baseline_rows(GateContext(db, "c", "h", "now", 1.0), COMBO, {TPUT: 1.0, STEP: 2.0},
                         {TPUT: ThresholdSpec(kind="baseline", tolerance_pct=5),
                          STEP: ThresholdSpec(kind="baseline", tolerance_pct=5)}, True, warnings.append, unit_for)
    assert [(r.name, r.status, r.value) for r in rows] == [(TPUT, "RECORD", 1.0), (STEP, "RECORD", 2.0)]
    assert all(r.reason.startswith("history unreadable: ") and r.reason.endswith("; baseline not judged")
               for r in rows)
    assert len(warnings) == 1 and "history unreadable" in warnings[0] and str(db) in warnings[0]
