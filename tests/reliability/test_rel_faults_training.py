"""Training faults on the testbed: each is reported with its signature and node, detected within a
few poll intervals and round trips (`detection_bound`) of the fault line reaching the node's disk,
the combo measured before it is kept, and nothing is left on any node.

The fault is limited to the second combo's precision (SIM_FAULT_PRECISION), so the first combo
is a result measured before the fault. Every fault lands at step 4: steps 1-3 must be kept.

The silent NaN loss does not stop a trainer. A real step takes seconds, far longer than one poll,
so the harness reads the NaN step while the job runs and stops it. The simulated steps are
shorter than a poll, so a bare `nan_loss@4` races the harness to the last step. `hang@5` stands
for the real step time instead: the job prints the NaN step, then holds until it is stopped. If
the harness missed the NaN, the hang would end the combo as a stall with no NaN signature."""

from __future__ import annotations

import json
import re

import pytest

from cvs_tasks.run import combo_dir
from tests.reliability.helpers import (
    CONFIGS,
    STOP_CHECK_S,
    assert_nothing_left,
    assert_run_dir_readable,
    detection_bound,
    invoke,
    kept_first_combo,
    no_traceback,
    note_detection,
    precision_of,
    scenario_for,
    set_fault,
    spy,
)

pytestmark = [pytest.mark.testbed]

# From the fault line on disk to the record: up to a few poll intervals and the stop's check, then
# four round trips (the read that finds the line, the stop, freeing the GPUs, the health snapshot).
ROUND_TRIPS = 4

CASES = [
    # id, base config, SIM_FAULT, extra env, signature class, line that marks the fault on disk
    ("nccl_timeout", "sim_megatron_distributed.json", "nccl_timeout@4:0", {}, "nccl",
     r"Watchdog caught collective operation timeout"),
    ("hip_oom", "sim_megatron_single.json", "oom@4", {}, "oom", r"HIP out of memory"),
    ("gpu_memory_access_fault", "sim_megatron_single.json", "gpu_fault@4", {}, "gpu_fault",
     r"Memory access fault by GPU"),
    ("nan_grad_norm", "sim_megatron_single.json", "nan@4", {}, "nan", r"Unexpected result nan"),
    ("nan_loss", "sim_megatron_single.json", "nan_loss@4,hang@5", {"SIM_HANG_S": "600"}, "nan",
     r"lm loss: nan|nan iterations:\s*[1-9]"),
]


@pytest.mark.parametrize("fault, base, sim_fault, extra, cls, line", CASES, ids=[c[0] for c in CASES])
def test_training_fault_is_reported_with_signature_and_node(fault, base, sim_fault, extra, cls, line, testbed_cluster,
                                                           reports, tmp_path, node_roots):
    cluster = testbed_cluster.cluster_file if "distributed" in base else testbed_cluster.single_cluster_file
    healthy, faulty = json.loads((CONFIGS / base).read_text())["sweep"]["runs"]
    sc = scenario_for(tmp_path, cluster, node_roots, base=base, env=set_fault(extra, sim_fault, precision_of(faulty)))
    watch = spy(sc.log_dir, line)
    res = invoke("all", *sc.flags(), reports=reports)
    watch.stop()

    assert res.code == 1, res.out + res.err
    no_traceback(res)
    bad = res.record("training", faulty)
    assert bad["status"] == "FAIL"
    assert bad["data"]["error"]["cls"] == cls, bad["data"]["error"]
    hosts = {n.address for n in testbed_cluster.nodes}
    assert bad["data"]["error"]["host"] in hosts
    assert f"on node {bad['data']['error']['host']}" in bad["reason"]
    assert bad["data"]["log_tail"], "the failing node's log tail is missing"
    kept = {step for step, _ms, _tflops, _tokens, loss in bad["data"]["steps"] if loss is not None}
    assert {1, 2, 3} <= kept, f"the iterations before the fault were lost: {sorted(kept)}"
    # the job ended at the fault: step 3 is the last line before it (step 4 for the NaN step itself)
    assert bad["data"]["last_step"] == (4 if fault == "nan_loss" else 3), bad["data"]["last_step"]
    if fault == "nan_loss":  # the first NaN step is the one reported, not a later one
        assert re.search(r"iteration\s+4/", bad["data"]["error"]["text"]), bad["data"]["error"]
    assert res.record("metric", faulty)["status"] == "SKIPPED"
    kept_first_combo(res, healthy)
    assert res.record("teardown")["status"] == "PASS"
    results = assert_run_dir_readable(res.run_dir)
    assert results["verdict"] == "FAIL"
    assert_nothing_left(testbed_cluster, sc, res.run_dir.name)

    seen = watch.wait_seen(5)
    note_detection(fault, bad["ended"] - seen, detection_bound(4 * sc.poll_interval_s + STOP_CHECK_S, ROUND_TRIPS),
                   "fault line on disk")


def test_training_hang_is_a_stall_named_with_the_step(testbed_cluster, reports, tmp_path, node_roots):
    healthy, faulty = json.loads((CONFIGS / "sim_megatron_single.json").read_text())["sweep"]["runs"]
    stall = 3.0
    sc = scenario_for(tmp_path, testbed_cluster.single_cluster_file, node_roots, stall_timeout_s=stall,
                      env=set_fault({"SIM_HANG_S": "600"}, "hang@4", precision_of(faulty)))
    watch = spy(sc.log_dir / "megatron-logs" / combo_dir(faulty), r"iteration\s+3/")
    res = invoke("all", *sc.flags(), reports=reports)
    watch.stop()

    assert res.code == 1, res.out + res.err
    no_traceback(res)
    bad = res.record("training", faulty)
    assert bad["status"] == "FAIL"
    assert "no new iteration" in bad["reason"] and "3/10" in bad["reason"], bad["reason"]
    kept_first_combo(res, healthy)
    assert_run_dir_readable(res.run_dir)
    assert_nothing_left(testbed_cluster, sc, res.run_dir.name)
    # from the last progress line to the record: the stall timeout plus a few polls
    seen = watch.wait_seen(5)
    note_detection("training_hang", bad["ended"] - seen,
                   detection_bound(stall + 4 * sc.poll_interval_s + STOP_CHECK_S, ROUND_TRIPS),
                   "last iteration line (stall_timeout_s=3)")
