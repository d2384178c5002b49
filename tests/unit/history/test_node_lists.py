"""passing_nodes.txt / failing_nodes.txt and the report's node section (fingerprints, drift, bad nodes)."""

from __future__ import annotations

from cvs_tasks.report import render_all
from cvs_tasks.report.nodes import node_verdicts
from cvs_tasks.run import StageRecord
from tests.unit.history.runs import make_run


def test_a_run_that_judged_nodes_writes_both_lists(tmp_path):
    run = make_run(tmp_path, "r", created=1.0, node_fail="127.0.0.3")
    render_all(run)
    assert (run.path / "passing_nodes.txt").read_text() == "127.0.0.2\n"
    assert (run.path / "failing_nodes.txt").read_text() == "127.0.0.3\n"


def test_an_all_good_run_has_an_empty_failing_list(tmp_path):
    run = make_run(tmp_path, "r", created=1.0)
    render_all(run)
    assert (run.path / "passing_nodes.txt").read_text().split() == ["127.0.0.2", "127.0.0.3"]
    assert (run.path / "failing_nodes.txt").read_text() == ""


def test_a_diagnose_outlier_is_a_failing_node(tmp_path):
    run = make_run(tmp_path, "r", created=1.0)
    rec = StageRecord("diagnose", "FAIL", reason="outlier")
    rec.data = {"outliers": [{"host": "127.0.0.3", "reason": "step time +40% over the median"}],
                "per_node": [{"host": "127.0.0.2", "status": "PASS", "step_ms": 100, "tokens": 10, "reason": ""},
                             {"host": "127.0.0.3", "status": "PASS", "step_ms": 140, "tokens": 7, "reason": "slow"}],
                "summary": "1 outlier"}
    run.write_record(rec)
    paths = render_all(run)
    assert (run.path / "failing_nodes.txt").read_text() == "127.0.0.3\n"
    html = paths["report"].read_text()
    assert "Failing nodes (1)" in html and "step time +40% over the median" in html


def test_the_report_marks_the_drifting_fingerprint_cell(tmp_path):
    facts = {"127.0.0.2": {"driver": "6.10.5", "kernel": "6.8"}, "127.0.0.3": {"driver": "6.9.0", "kernel": "6.8"}}
    run = make_run(tmp_path, "r", created=1.0, facts=facts)
    html = render_all(run)["report"].read_text()
    assert "Version drift." in html and "driver 6.9.0 differs from 6.10.5" in html
    passing, failing = node_verdicts({"tests": []})
    assert (passing, failing) == ([], {})
