"""The first-failure callout: which failing test, which node and line, what to do."""

from __future__ import annotations

from cvs_tasks.report.first_failure import CONTEXT, INFRA_HINT, first_failure
from cvs_tasks.run.stages import METRIC


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


def test_an_infrastructure_error_without_a_signature_says_so():
    failure = first_failure([_test("test_training[y]", "ERROR", 1.0)], None)
    assert failure["hint"] == INFRA_HINT and failure["signature"] is None


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
