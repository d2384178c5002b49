import json
import os

import pytest

from cvs_tasks.errors import BadInput
from cvs_tasks.run import MetricRow, NodeOutcome, RunDir, StageRecord, combo_dir
from cvs_tasks.run import test_name as row_name
from cvs_tasks.run.rundir import check_run_flag


def test_combo_dir_and_test_names():
    assert combo_dir("MBS=4,GBS=128,PRECISION=FP8") == "MBS_4_GBS_128_PRECISION_FP8"
    assert row_name("training", "MBS=4,GBS=128,PRECISION=FP8") == "test_training[MBS=4,GBS=128,PRECISION=FP8]"
    assert row_name("teardown") == "test_teardown"


def test_records_round_trip_and_sort_in_lifecycle_order(tmp_path):
    run = RunDir.create(tmp_path, "r1")
    run.write_manifest({"run_id": "r1", "combos": ["B", "A"]})
    rec = StageRecord(
        stage="metric",
        combo="A",
        status="FAIL",
        reason="x",
        metrics=[MetricRow("training.throughput_per_gpu", 1.0, "TFLOP/s/GPU", ">= 2", "FAIL", "low")],
        nodes=[NodeOutcome("h", 0, "PASS")],
    )
    for r in (rec, StageRecord(stage="training", combo="A", status="PASS"),
              StageRecord(stage="training", combo="B", status="PASS"),
              StageRecord(stage="launch_container", status="PASS")):
        run.write_record(r)
    names = [r.name for r in run.records()]
    assert names == ["test_launch_container", "test_training[B]", "test_training[A]", "test_metric[A]"]
    back = run.read_record("metric", "A")
    assert back.metrics[0].status == "FAIL" and back.nodes[0].host == "h"
    assert json.loads(run.record_path("metric", "A").read_text())["name"] == "test_metric[A]"


def test_latest_points_at_the_newest_run_and_resolve_finds_it(tmp_path):
    RunDir.create(tmp_path, "old").write_manifest({"run_id": "old"})
    new = RunDir.create(tmp_path, "new")
    new.write_manifest({"run_id": "new"})
    assert os.readlink(tmp_path / "latest") == "new"
    assert RunDir.resolve(tmp_path, None).run_id == "new"
    assert RunDir.resolve(tmp_path, "old").run_id == "old"


def test_resolve_says_what_it_tried(tmp_path):
    with pytest.raises(BadInput, match="no run directory found"):
        RunDir.resolve(tmp_path, "nope")


def test_a_corrupt_record_counts_as_not_done(tmp_path):
    run = RunDir.create(tmp_path, "r")
    run.record_path("smoke").write_text("{not json")
    assert run.read_record("smoke") is None
    assert run.records() == []


@pytest.mark.parametrize("run", ["/tmp/a\nb/20260101-000000-abcd", "rep\x1borts/20260101-000000-abcd",
                                 "/tmp/x\u202ey/20260101-000000-abcd", "/tmp/ok\r/20260101-000000-abcd"])
def test_a_control_character_anywhere_in_a_run_path_is_refused(run):
    with pytest.raises(BadInput, match="control character"):
        check_run_flag(run)


def test_a_symlinked_parent_is_checked_where_it_leads(tmp_path):
    target = tmp_path / "a\nb"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(BadInput, match=r"control character\(s\) \\n"):
        check_run_flag(str(tmp_path / "link" / "20260101-000000-abcd"))
    check_run_flag(str(tmp_path / "20260101-000000-abcd"))  # a clean path passes


def test_a_symlink_loop_or_a_nul_in_a_run_path_is_no_traceback(tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    check_run_flag(str(tmp_path / "loop" / "20260101-000000-abcd"))  # nothing to resolve: the id decides
    with pytest.raises(BadInput, match="control character"):
        check_run_flag("/\x00/20260101-000000-abcd")
