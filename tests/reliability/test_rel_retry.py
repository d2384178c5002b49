"""Retry policy: transport and infrastructure steps (SSH connect, image pull, docker rm) retry with
backoff and record every failed attempt in the stage record; a training run that completed and
failed a gate is a result and is never retried."""

from __future__ import annotations

import pytest

from cvs_tasks.remote import RetryPolicy, retry_call
from tests.e2e.conftest import impossible_gate
from tests.reliability.helpers import assert_nothing_left, invoke, no_traceback, scenario_for
from tests.reliability.test_rel_faults_start import UNREACHABLE, write_cluster


def test_backoff_grows_and_every_failure_is_recorded():
    waits, record = [], []
    outcomes = iter(["refused", "refused", None])
    result = retry_call("ssh connect n1", lambda: next(outcomes), lambda r: r, RetryPolicy(attempts=4, first_delay=1.0),
                        record, sleep=waits.append)
    assert result is None
    assert waits == [1.0, 2.0]
    assert [(a.step, a.attempt, a.error) for a in record] == [("ssh connect n1", 1, "refused"),
                                                              ("ssh connect n1", 2, "refused")]


@pytest.mark.testbed
def test_ssh_connect_and_docker_rm_retries_are_in_the_launch_record(testbed_cluster, reports, tmp_path, node_roots):
    cluster = write_cluster(tmp_path, testbed_cluster, [testbed_cluster.nodes[0].address, UNREACHABLE])
    sc = scenario_for(tmp_path, cluster, node_roots, base="sim_megatron_distributed.json")
    res = invoke("container", *sc.flags(), reports=reports)
    assert res.code == 3
    no_traceback(res)
    attempts = res.record("launch_container")["attempts"]
    connects = [a for a in attempts if a["step"] == f"ssh connect {UNREACHABLE}"]
    removes = [a for a in attempts if a["step"] == "docker rm"]
    assert len(connects) >= 2 and all("connection refused" in a["error"] for a in connects), attempts
    assert [a["attempt"] for a in removes] == [1, 2, 3], attempts  # three rounds, backoff between them
    assert removes[1]["seconds"] >= 0 and all(UNREACHABLE in a["error"] for a in removes)
    invoke("teardown", reports=reports)
    assert_nothing_left(testbed_cluster, sc, res.run_dir.name)


@pytest.mark.testbed
def test_a_completed_run_that_failed_a_gate_is_never_retried(testbed_cluster, reports, tmp_path, node_roots):
    gate = impossible_gate(tmp_path, "training.throughput_per_gpu", {"kind": "min", "value": 1e9})
    sc = scenario_for(tmp_path, testbed_cluster.single_cluster_file, node_roots, edit=gate)
    res = invoke("all", *sc.flags(), reports=reports)
    assert res.code == 1, res.out + res.err
    for combo in sc.combos:
        training = res.record("training", combo)
        assert training["status"] == "PASS" and training["attempts"] == []
        assert res.record("metric", combo)["status"] == "FAIL"
        stage_log = (res.run_dir / training["artifacts"]["stage log"]).read_text()
        assert stage_log.count(" started") == 1, stage_log  # one job launch per combo
        node_log = (res.run_dir / training["nodes"][0]["log"]).read_text()
        assert node_log.count("[before the start of training step]") == 1
    assert_nothing_left(testbed_cluster, sc, res.run_dir.name)
