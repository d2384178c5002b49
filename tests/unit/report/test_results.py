from __future__ import annotations

from cvs_tasks.report.results import NOT_RUN, build_results, file_in_run
from cvs_tasks.run.records import MetricRow, StageRecord
from cvs_tasks.run.rundir import RunDir

from .conftest import edit_manifest, edit_record

FP8 = "MBS=4,GBS=128,PRECISION=FP8"
BF16 = "MBS=4,GBS=128,PRECISION=BF16"
LIFECYCLE_NAMES = [
    "test_launch_container",
    "test_download_tokenizer",
    "test_smoke",
    "test_checkpoint",
    f"test_training[{FP8}]",
    f"test_training[{BF16}]",
    f"test_metric[{FP8}]",
    f"test_metric[{BF16}]",
    f"test_loss_curve[{FP8}]",
    f"test_loss_curve[{BF16}]",
    "test_teardown",
]


def by_name(results: dict) -> dict[str, dict]:
    return {t["name"]: t for t in results["tests"]}


def test_complete_passing_run_passes_with_record_and_skipped_metrics(fixture_run):
    results = build_results(fixture_run("passing_distributed"))
    assert results["verdict"] == "PASS"
    assert results["incomplete"] is False and results["not_run"] == []
    assert results["counts"] == {"PASS": 10, "FAIL": 0, "ERROR": 0, "SKIPPED": 1, "NOT-RUN": 0, "total": 11}
    assert results["metric_counts"] == {"PASS": 6, "FAIL": 0, "RECORD": 2, "SKIPPED": 2, "total": 10}
    assert [t["name"] for t in results["tests"]] == LIFECYCLE_NAMES


def test_summary_fields_come_from_the_manifest(fixture_run):
    results = build_results(fixture_run("passing_distributed"))
    assert results["run_id"] == "20260528-101320-a1b2"
    assert results["hosts"] == ["gpu-node-01", "gpu-node-02"]
    assert results["backend"] == "Primus" and results["suite"] == "distributed"
    assert results["gpu_name"] == "MI300X" and results["gpus_per_node"] == 8
    assert results["duration_s"] == 1510.0
    assert results["combos"] == [FP8, BF16]


def test_test_rows_carry_stage_combo_metrics_and_logs(fixture_run):
    test = by_name(build_results(fixture_run("passing_distributed")))[f"test_metric[{BF16}]"]
    assert (test["stage"], test["combo"], test["status"]) == ("metric", BF16, "PASS")
    assert test["duration_s"] == 0.2
    names = [m["name"] for m in test["metrics"]]
    assert names[0] == "training.throughput_per_gpu"
    assert set(test["metrics"][0]) == {"name", "value", "unit", "expected", "status", "reason"}
    training = by_name(build_results(fixture_run("passing_distributed")))[f"test_training[{FP8}]"]
    assert [log["path"] for log in training["logs"]] == [
        "logs/training[MBS_4_GBS_128_PRECISION_FP8].log",
        "logs/training/MBS_4_GBS_128_PRECISION_FP8/out-node0/training.log",
        "logs/training/MBS_4_GBS_128_PRECISION_FP8/out-node1/training.log",
    ]
    assert all(log["exists"] for log in training["logs"])
    assert "steps" not in training["details"]  # bulky per-step rows stay in the record
    assert training["details"]["scaling_efficiency_pct"] == 96.4


def test_failed_combo_fails_the_verdict_but_its_rule_skips_are_not_incompleteness(fixture_run):
    results = build_results(fixture_run("failed_nccl"))
    tests = by_name(results)
    assert results["verdict"] == "FAIL"
    assert results["incomplete"] is False
    assert results["counts"]["FAIL"] == 2
    assert tests[f"test_training[{FP8}]"]["status"] == "FAIL"
    assert tests[f"test_training[{FP8}]"]["details"]["error"]["name"] == "nccl_timeout"
    assert tests[f"test_metric[{FP8}]"]["status"] == "SKIPPED"
    assert tests[f"test_metric[{FP8}]"]["reason"] == "training did not complete"
    assert "2 failed" in results["verdict_reason"]


def test_listed_log_that_was_never_pulled_back_is_marked_missing(fixture_run):
    tests = by_name(build_results(fixture_run("failed_nccl")))
    logs = {log["path"]: log["exists"] for log in tests[f"test_training[{BF16}]"]["logs"]}
    assert logs["logs/training/MBS_4_GBS_128_PRECISION_BF16/out-node0/training.log"] is True
    assert logs["logs/training/MBS_4_GBS_128_PRECISION_BF16/out-node1/training.log"] is False


def test_interrupted_run_lists_unrun_rows_as_not_run_and_fails(fixture_run):
    results = build_results(fixture_run("partial"))
    tests = by_name(results)
    assert results["verdict"] == "FAIL"
    assert results["incomplete"] is True and results["interrupted"] is True
    assert results["not_run"] == [
        f"test_training[{BF16}]",
        f"test_metric[{BF16}]",
        f"test_loss_curve[{FP8}]",
        f"test_loss_curve[{BF16}]",
        "test_teardown",
    ]
    for name in results["not_run"]:
        assert (tests[name]["status"] == NOT_RUN
                and tests[name]["reason"].startswith("not run: the run was interrupted before it"))
        assert "invoke all --run" in tests[name]["reason"]
        assert tests[name]["duration_s"] is None
    assert [t["name"] for t in results["tests"]] == LIFECYCLE_NAMES
    assert results["image"] is None and results["finished"] is None
    assert results["duration_s"] == 300.1  # no `finished`: up to the last record's end


def test_interrupted_run_still_links_the_logs_it_pulled_back(fixture_run):
    tests = by_name(build_results(fixture_run("partial")))
    logs = tests[f"test_training[{BF16}]"]["logs"]
    assert logs == [
        {
            "label": "node 0 log",
            "path": "logs/training/MBS_4_GBS_128_PRECISION_BF16/out-node0/training.log",
            "exists": True,
        }
    ]


def test_all_records_present_but_interrupted_flag_still_fails(fixture_run):
    run = fixture_run("passing_distributed")
    edit_manifest(run, lambda m: m.update(interrupted=True))
    results = build_results(run)
    assert results["verdict"] == "FAIL" and results["incomplete"] is True
    assert "interrupted" in results["verdict_reason"]


def test_an_error_row_fails_the_verdict(fixture_run):
    run = fixture_run("passing_distributed")
    edit_record(run, "teardown.json", lambda d: d.update(status="ERROR", reason="docker rm timed out on gpu-node-02"))
    results = build_results(run)
    assert results["verdict"] == "FAIL"
    assert results["counts"]["ERROR"] == 1
    assert "1 errored" in results["verdict_reason"]


def test_unknown_record_status_becomes_error(fixture_run):
    run = fixture_run("passing_distributed")
    edit_record(run, "smoke.json", lambda d: d.update(status="WEIRD"))
    smoke = by_name(build_results(run))["test_smoke"]
    assert smoke["status"] == "ERROR" and "WEIRD" in smoke["reason"]


def test_order_is_lifecycle_then_manifest_combo_order_regardless_of_write_order(tmp_path):
    run = RunDir.create(tmp_path / "reports", "r1")
    run.write_manifest({"run_id": "r1", "combos": ["B", "A"]})
    for stage, combo in [("teardown", None), ("metric", "A"), ("training", "A"), ("training", "B"), ("smoke", None)]:
        run.write_record(StageRecord(stage=stage, status="PASS", combo=combo, started=1.0, ended=2.0))
    run.write_record(StageRecord(stage="training", status="PASS", combo="C", started=1.0, ended=2.0))
    names = [t["name"] for t in build_results(run)["tests"]]
    assert names.index("test_training[B]") < names.index("test_training[A]") < names.index("test_training[C]")
    assert names.index("test_smoke") < names.index("test_training[B]") < names.index("test_metric[B]")
    assert names[-1] == "test_teardown"
    assert build_results(run)["combos"] == ["B", "A", "C"]


def test_metric_fail_row_counted_and_record_rows_never_fail(tmp_path):
    run = RunDir.create(tmp_path / "reports", "r2")
    run.write_manifest({"run_id": "r2", "combos": []})
    rows = [
        MetricRow("training.mem_usage", None, "GB", "<= 180", "SKIPPED", "optional"),
        MetricRow("training.tokens_per_gpu", 10.0, "tok/s/GPU", "-", "RECORD"),
    ]
    run.write_record(StageRecord(stage="metric", status="PASS", combo="X", metrics=rows))
    results = build_results(run)
    assert results["metric_counts"]["SKIPPED"] == 1 and results["metric_counts"]["RECORD"] == 1
    assert by_name(results)["test_metric[X]"]["status"] == "PASS"


def test_empty_run_directory_does_not_crash(tmp_path):
    results = build_results(RunDir(tmp_path / "nothing"))
    assert results["verdict"] == "FAIL" and results["incomplete"] is True
    assert results["run_id"] == "nothing"
    assert all(t["status"] == "NOT-RUN" for t in results["tests"])
    assert all("the run stopped before it" in t["reason"] for t in results["tests"])


def test_file_in_run_refuses_paths_outside_the_run(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "secret.txt").write_text("x")
    (tmp_path / "run" / "ok.log").write_text("x")
    assert file_in_run(tmp_path / "run", "ok.log")
    assert not file_in_run(tmp_path / "run", "../secret.txt")
    assert not file_in_run(tmp_path / "run", str(tmp_path / "secret.txt"))
    assert not file_in_run(tmp_path / "run", "")
