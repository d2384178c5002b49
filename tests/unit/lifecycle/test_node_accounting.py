"""Honest accounting of nodes: a node that exited non-zero, left no exit status or no log is a
failed node, and a job that one node saw complete is not complete while another node failed."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from cvs_tasks.lifecycle.jobrun import JobResult
from cvs_tasks.lifecycle.train_stages import _job_record
from cvs_tasks.lifecycle.watch import WatchOutcome


def _node(tmp_path: Path, rank: int, exit_code, *, log: bool = True, state: str = "done"):
    local = tmp_path / f"node{rank}.log"
    if log:
        local.write_text("iteration 10/10\n")
    target = SimpleNamespace(host=f"10.0.0.{rank + 1}", rank=rank, local_copy=local)
    return SimpleNamespace(target=target, exit_code=exit_code, state=state, last_step=10, planned=10)


def _record(tmp_path: Path, nodes):
    session = SimpleNamespace(redactor=lambda text: text,
                              run=SimpleNamespace(relative=lambda p: str(Path(p).relative_to(tmp_path))))
    outcome = WatchOutcome("completed", "completed", nodes, len(nodes) - 1, 12.0)
    return _job_record(session, JobResult(job=None, outcome=outcome))


def test_every_node_exited_zero_with_a_log_is_a_pass(tmp_path):
    record = _record(tmp_path, [_node(tmp_path, 0, 0), _node(tmp_path, 1, 0)])
    assert record.status == "PASS" and [n.status for n in record.nodes] == ["PASS", "PASS"]


def test_a_node_without_exit_status_fails_the_combo_by_name(tmp_path):
    record = _record(tmp_path, [_node(tmp_path, 0, None), _node(tmp_path, 1, 0)])
    assert record.status == "FAIL"
    assert record.nodes[0].status == "FAIL" and record.nodes[0].reason == "no exit status"
    assert "node 10.0.0.1: no exit status" in record.reason


def test_a_node_whose_log_never_arrived_is_failed_not_absent(tmp_path):
    record = _record(tmp_path, [_node(tmp_path, 0, 0, log=False), _node(tmp_path, 1, 0)])
    assert record.status == "FAIL" and record.nodes[0].log is None
    assert record.nodes[0].reason == "no log" and "node 10.0.0.1: no log" in record.reason
    assert len(record.nodes) == 2  # every node appears


def test_a_non_zero_exit_after_completion_fails(tmp_path):
    record = _record(tmp_path, [_node(tmp_path, 0, 1), _node(tmp_path, 1, 0)])
    assert record.status == "FAIL" and "node 10.0.0.1: exit 1" in record.reason
