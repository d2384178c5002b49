"""The first-failure callout: which failing test, which node and line, what to do."""

from __future__ import annotations

from cvs_tasks.report.first_failure import CONTEXT, cause_text, first_failure, infra_hint, line_rank, where_text
from cvs_tasks.run.stages import LOSS_CURVE, METRIC, TRAINING


def _test(name, status, started, stage="training", **extra):
    return {"name": name, "status": status, "started": started, "stage": stage, "combo": None,
            "reason": f"{name} {status}", "details": {}, "nodes": [], "logs": [], **extra}


def test_nothing_failed_means_no_callout():
    assert first_failure([_test("a", "PASS", 1.0), _test("b", "SKIPPED", None)], None) is None


def test_the_failure_that_started_first_is_the_one_to_read():
    tests = [_test("test_metric[x]", "FAIL", 50.0, stage="metric"),
             _test("test_training[y]", "FAIL", 10.0),
             _test("test_teardown", "ERROR", None, stage="teardown")]
    assert first_failure(tests, None)["test"] == "test_training[y]"
    only_metric = first_failure(tests[:1], None)
    assert only_metric["hint"] == METRIC.hint and only_metric["context"] == []


def test_an_infrastructure_error_without_a_signature_says_so_with_the_real_run_id():
    failure = first_failure([_test("test_training[y]", "ERROR", 1.0)], None, run_id="20261206-1-ab")
    assert failure["hint"] == infra_hint("20261206-1-ab") and failure["signature"] is None
    assert "`invoke all --run 20261206-1-ab`" in failure["hint"] and "<id>" not in failure["hint"]


def test_the_node_log_around_the_line_is_shown(tmp_path):
    log = tmp_path / "logs" / "n1.log"
    log.parent.mkdir()
    log.write_text("".join(f"line {n}\n" for n in range(1, 10_001)))
    error = {"name": "gpu_oom", "cls": "oom", "host": "n1", "rank": 1, "line": 500, "text": "line 500"}
    nodes = [{"host": "n0", "status": "FAIL", "log": "logs/n0.log"},
             {"host": "n1", "status": "FAIL", "log": "logs/n1.log"}]
    failure = first_failure([_test("t", "FAIL", 1.0, details={"error": error}, nodes=nodes)], tmp_path)
    assert failure["node"] == "n1" and failure["log"] == "logs/n1.log" and failure["line_no"] == 500
    assert [n for n, _ in failure["context"]] == list(range(500 - CONTEXT, 500 + CONTEXT + 1))
    assert failure["context"][CONTEXT] == [500, "line 500"]
    from cvs_tasks.metrics.signatures import SIGNATURES

    assert failure["hint"] == next(s.hint for s in SIGNATURES if s.name == "gpu_oom") != ""  # the table's hint


def test_an_unreadable_or_missing_log_leaves_the_line_alone(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "dir.log").mkdir()  # a directory where the log should be
    error = {"name": "x", "cls": "y", "host": "n0", "line": 3, "text": "boom"}
    nodes = [{"host": "n0", "status": "FAIL", "log": "logs/dir.log"}]
    failure = first_failure([_test("t", "FAIL", 1.0, details={"error": error}, nodes=nodes)], tmp_path)
    assert failure["context"] == [] and failure["line"] == "boom"


# -- issue #26 item 8: the first box is exact ---------------------------------------------------------
OOM_LINE = "[rank7]: torch.OutOfMemoryError: HIP out of memory. Tried to allocate 3.91 GiB."
NODE_LOG = "logs/training/X/out-node0/training.log"
STAGE_LOG = "logs/training[X].log"


def _oom_test(**extra):
    error = {"name": "gpu_oom", "cls": "oom", "host": "localhost", "rank": 0, "line": 76, "text": OOM_LINE}
    return _test("test_training[X]", "FAIL", 1.0, combo="X", details={"error": error},
                 nodes=[{"host": "localhost", "rank": 0, "status": "FAIL", "log": NODE_LOG, "last_step": 2}],
                 logs=[{"label": "stage log", "path": STAGE_LOG, "exists": True},
                       {"label": "node 0 log (localhost)", "path": NODE_LOG, "exists": True}], **extra)


def test_an_oom_on_rank7_names_rank_7_not_the_nodes_place_in_the_cluster():
    failure = first_failure([_oom_test()], None)
    assert failure["node"] == "localhost" and failure["rank"] == 7 and failure["node_rank"] == 0
    assert where_text(failure) == "node localhost, rank 7"
    assert failure["log"] == NODE_LOG and failure["stage_log"] == STAGE_LOG


def test_the_rank_is_read_from_every_launchers_tag():
    assert line_rank("[rank7]: torch.OutOfMemoryError") == 7
    assert line_rank("\x1b[31m[rank9]:[E528 12:16:12.004] [PG 0 Rank 9] Watchdog") == 9
    assert line_rank("[default3]: RuntimeError: boom") == 3
    assert line_rank("[rank-5/8] ERROR NaN loss") == 5
    assert line_rank("failed (exitcode: 1) local_rank: 6 (pid: 8661)") == 6
    assert line_rank("12: Traceback (most recent call last)") == 12
    assert line_rank("RuntimeError: HIP error: an illegal memory access") is None


def test_a_line_without_a_rank_names_the_node_by_its_place_not_rank_0():
    test = _oom_test()
    test["details"]["error"]["text"] = "Memory access fault by GPU node-2 on address 0x7f. Reason: Page not present"
    failure = first_failure([test], None)
    assert failure["rank"] is None and where_text(failure) == "node localhost (node 0 of the cluster)"


def _training(combo, nodes):
    return _test(f"test_training[{combo}]", "PASS", 1.0, stage=TRAINING.id, combo=combo, nodes=nodes)


def test_a_threshold_failure_names_the_measured_node_the_metric_its_unit_and_bound_and_the_node_log():
    nodes = [{"host": "n0", "rank": 0, "status": "PASS", "last_step": 200, "log": "logs/training/X/out-node0/t.log"},
             {"host": "n1", "rank": 1, "status": "PASS", "last_step": 200, "log": "logs/training/X/out-node1/t.log"}]
    metric = _test("test_metric[X]", "FAIL", 5.0, stage=METRIC.id, combo="X",
                   reason="training.throughput_per_gpu: 396.2 is below the minimum 420",
                   logs=[{"label": "stage log", "path": "logs/metric[X].log", "exists": True}],
                   metrics=[{"name": "training.throughput_per_gpu", "value": 396.2, "unit": "TFLOP/s/GPU",
                             "expected": ">= 420", "status": "FAIL", "reason": "396.2 is below the minimum 420"},
                            {"name": "training.elapsed_time_per_iteration", "value": 2953.2, "unit": "ms",
                             "expected": "<= 3200 ms", "status": "PASS", "reason": ""}])
    failure = first_failure([_training("X", nodes), metric], None)
    assert failure["node"] == "n1" and where_text(failure) == "node n1 (node 1 of the cluster)"  # the last rank
    assert failure["metrics"] == [{"name": "throughput_per_gpu", "value": "396.2 TFLOP/s/GPU",
                                   "bound": ">= 420 TFLOP/s/GPU", "reason": "396.2 is below the minimum 420"}]
    assert cause_text(failure) == "throughput_per_gpu 396.2 TFLOP/s/GPU, bound >= 420 TFLOP/s/GPU"
    assert failure["log"] == "logs/training/X/out-node1/t.log"  # the node's log, never the stage log
    assert failure["stage_log"] == "logs/metric[X].log" and failure["hint"] == METRIC.hint


def test_a_loss_curve_failure_names_its_slope_and_bound():
    loss = _test("test_loss_curve[X]", "FAIL", 5.0, stage=LOSS_CURVE.id, combo="X",
                 details={"slope": 0.0125, "max_slope": 0.0})
    failure = first_failure([loss], None)
    assert failure["metrics"] == [{"name": "loss slope", "value": "0.0125 per step", "bound": "<= 0 per step",
                                   "reason": ""}]


def test_an_interrupted_stage_is_called_interrupted_with_the_real_run_id():
    test = _test("test_training[X]", "ERROR", 1.0, reason="interrupted by the user",
                 details={"interrupted": True})
    failure = first_failure([test], None, run_id="20261206-044803-ea9e", interrupted=True)
    assert failure["status"] == "INTERRUPTED" and failure["interrupted"] is True
    assert "infrastructure" not in failure["hint"] and "<id>" not in failure["hint"]
    assert "`invoke all --run 20261206-044803-ea9e`" in failure["hint"]
    assert cause_text(failure) == "interrupted by the user"


def test_an_interrupted_run_with_nothing_failed_still_says_so():
    tests = [_test("test_smoke", "PASS", 1.0), _test("test_training[X]", "NOT-RUN", None)]
    assert first_failure(tests, None) is None
    failure = first_failure(tests, None, run_id="r-1", interrupted=True)
    assert failure["status"] == "INTERRUPTED" and failure["test"] == "test_training[X]"
    assert "`invoke all --run r-1`" in failure["hint"] and "r-1" in failure["reason"]
