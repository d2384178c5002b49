"""Faults that hit a run mid-training: a node's container killed, the harness interrupted (SIGINT,
SIGTERM, SIGINT then SIGTERM) and the harness SIGKILLed, followed by `invoke teardown` or
`invoke cleanup` finding and removing the labelled leftovers.

The first combo is short and completes; the second is long and is where the fault lands."""

from __future__ import annotations

import signal
import time

import pytest

from cvs_tasks.run import combo_dir
from testbed import docker_api
from tests.reliability.helpers import (
    RunningInvoke,
    assert_nothing_left,
    assert_run_dir_readable,
    containers_of,
    invoke,
    kept_first_combo,
    marked_processes,
    no_traceback,
    note_detection,
    read_json,
    scenario_for,
    spy,
)

pytestmark = [pytest.mark.testbed]


def long_second_combo(cfg) -> None:
    """First combo 5 steps, second 40 steps of 0.4 s: time to act while the second one runs."""
    first, second = cfg["sweep"]["runs"]
    cfg["sweep"]["combinations"][first]["training_iterations"] = "5"
    cfg["sweep"]["combinations"][second]["training_iterations"] = "40"
    cfg["container"]["env"]["SIM_TIME_SCALE"] = "0.25"
    cfg["loss_curve"]["milestone_steps"] = [2, 5]


def mid_second_combo(sc):
    """A spy that fires once the second combo has logged iteration 3 (the last node prints them)."""
    return spy(sc.log_dir / "megatron-logs" / combo_dir(sc.combos[1]), r"iteration\s+3/", glob="out-node*/training.log")


def test_a_nodes_container_killed_mid_run_fails_the_combo_and_nobody_hangs(testbed_cluster, reports, tmp_path,
                                                                          node_roots):
    sc = scenario_for(tmp_path, testbed_cluster.cluster_file, node_roots, base="sim_megatron_distributed.json",
                      edit=long_second_combo)
    victim = testbed_cluster.nodes[1]
    with RunningInvoke("all", *sc.flags(), reports=reports) as run:
        mid_second_combo(sc).wait_seen(120)
        killed_at = time.time()
        docker_api.kill(victim.docker_host, sc.container)
        res = run.wait(180)
    no_traceback(res)
    assert res.code in (1, 3), res.out + res.err
    bad = res.record("training", sc.combos[1])
    assert bad["status"] in ("FAIL", "ERROR")
    assert bad["status"] == "ERROR" and res.code == 3
    assert f"container not running on node {victim.address}" in bad["reason"], bad["reason"]
    kept_first_combo(res, sc.combos[0])
    assert res.record("teardown")["status"] == "PASS"
    assert_run_dir_readable(res.run_dir)
    assert_nothing_left(testbed_cluster, sc, res.run_dir.name)
    note_detection("node_container_killed", bad["ended"] - killed_at, 30, "docker kill")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_mid_training_stops_tears_down_and_records(sig, testbed_cluster, reports, tmp_path, node_roots):
    sc = scenario_for(tmp_path, testbed_cluster.single_cluster_file, node_roots, edit=long_second_combo)
    with RunningInvoke("all", *sc.flags(), reports=reports) as run:
        mid_second_combo(sc).wait_seen(120)
        sent = run.signal(sig)
        res = run.wait(120)
    no_traceback(res)
    assert res.code == 130, res.out + res.err
    run_dir = res.run_dir
    assert read_json(run_dir / "run.json")["interrupted"] is True
    stopped = res.record("training", sc.combos[1])
    assert stopped["data"].get("interrupted") is True and stopped["status"] == "ERROR"
    assert res.record("teardown")["status"] == "PASS"
    kept_first_combo(res, sc.combos[0], gated=False)
    assert_run_dir_readable(run_dir)
    assert_nothing_left(testbed_cluster, sc, run_dir.name)
    note_detection(f"harness_{sig.name}", stopped["ended"] - sent, 10, f"{sig.name} sent")


def test_sigint_then_sigterm_exits_at_once_and_cleanup_removes_the_leftovers(testbed_cluster, reports, tmp_path,
                                                                            node_roots):
    sc = scenario_for(tmp_path, testbed_cluster.single_cluster_file, node_roots, edit=long_second_combo)
    with RunningInvoke("all", *sc.flags(), reports=reports) as run:
        mid_second_combo(sc).wait_seen(120)
        run.signal(signal.SIGINT)
        time.sleep(0.05)
        run.signal(signal.SIGTERM)
        res = run.wait(60)
    assert res.code == 130, res.out + res.err
    run_id = res.run_dir.name
    kept_first_combo(res, sc.combos[0], gated=False)  # recorded before the interrupt: still there and readable
    assert_run_dir_readable(res.run_dir, rendered=False)
    cleaned = invoke("cleanup", "--cluster", str(sc.cluster), "--config", str(sc.config), "--run", run_id,
                     reports=reports)
    assert cleaned.code == 0, cleaned.out + cleaned.err
    assert_nothing_left(testbed_cluster, sc, run_id)
    report = invoke("report", "--run", str(res.run_dir), reports=reports)  # a crashed run still renders
    assert (res.run_dir / "report.html").is_file(), report.out + report.err


@pytest.mark.parametrize("cleaner", ["teardown", "cleanup"])
def test_sigkill_mid_training_then_the_leftovers_are_found_and_removed(cleaner, testbed_cluster, reports, tmp_path,
                                                                      node_roots):
    sc = scenario_for(tmp_path, testbed_cluster.cluster_file, node_roots, base="sim_megatron_distributed.json",
                      edit=long_second_combo)
    with RunningInvoke("all", *sc.flags(), reports=reports) as run:
        mid_second_combo(sc).wait_seen(120)
        run.signal(signal.SIGKILL)
        res = run.wait(30)
    assert res.code == -signal.SIGKILL
    run_id = res.run_dir.name
    left = containers_of(testbed_cluster, run_id=run_id)
    assert len(left) == 2, left  # one labelled container per node
    assert (sc.scripts_dir / run_id).exists()  # the per-run folder with the token file

    listed = invoke("cleanup", "--cluster", str(sc.cluster), "--config", str(sc.config), "--run", run_id,
                    "--dry-run", reports=reports)
    assert listed.code == 0, listed.out + listed.err
    for node in testbed_cluster.nodes:
        assert f"{node.address}" in listed.out and sc.container in listed.out, listed.out
    assert len(containers_of(testbed_cluster, run_id=run_id)) == 2, "--dry-run removed something"

    if cleaner == "teardown":
        done = invoke("teardown", reports=reports)  # the latest run is the killed one
        assert done.code == 0, done.out + done.err
        assert res.record("teardown")["status"] == "PASS"
    else:
        done = invoke("cleanup", "--cluster", str(sc.cluster), "--config", str(sc.config), "--run", run_id,
                      reports=reports)
        assert done.code == 0, done.out + done.err
    no_traceback(done)
    kept_first_combo(res, sc.combos[0], gated=False)
    assert_nothing_left(testbed_cluster, sc, run_id)
    assert marked_processes(sc.marker, str(sc.node_root)) == []
