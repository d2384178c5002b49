"""Network and GPU health around every training job, on the testbed.

Each testbed node's shells see the node's own RDMA counters tree at /sys/class/infiniband and
its own kernel log through `dmesg`; the simulated trainer's `link_errors` and `gpu_reset` faults
change them on the last node (node 2, the second address) while the job itself completes. The
fault is limited to one combo's precision, so the other combo is the clean run of the same
invocation.
"""

from __future__ import annotations

import shutil

import pytest

from tests.reliability.helpers import (
    assert_nothing_left,
    assert_run_dir_readable,
    invoke,
    no_traceback,
    precision_of,
    scenario_for,
    set_fault,
)

pytestmark = [pytest.mark.testbed, pytest.mark.e2e]

BASE = "sim_megatron_distributed.json"


@pytest.fixture
def node_roots():
    """Scenario node folders under the shared dir, removed after the test (also on failure)."""
    made: list = []
    yield made
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


def checks_of(record: dict) -> dict[str, dict]:
    return {c["name"]: c for c in record["data"]["health"]["checks"]}


def run_with(fault: str, *, verify: bool, testbed_cluster, reports, tmp_path, node_roots):
    def edit(cfg):
        cfg["verify_network_errors"] = verify

    sc = scenario_for(tmp_path, testbed_cluster.cluster_file, node_roots, base=BASE, iterations=6, edit=edit,
                      env=set_fault({}, fault, "FP8"))
    faulty = next(c for c in sc.combos if precision_of(c) == "FP8")
    clean = next(c for c in sc.combos if c != faulty)
    res = invoke("all", *sc.flags(), reports=reports)
    no_traceback(res)
    return sc, res, faulty, clean


def assert_clean(res, combo: str) -> None:
    rec = res.record("training", combo)
    assert rec["status"] == "PASS", rec["reason"]
    checks = checks_of(rec)
    assert checks["rdma_error_counters"]["status"] == "PASS", checks["rdma_error_counters"]
    assert "2 node(s)" in checks["rdma_error_counters"]["summary"]
    assert checks["kernel_log"]["status"] == "PASS", checks["kernel_log"]
    rows = {m["name"]: m["status"] for m in res.test(f"test_training[{combo}]")["metrics"]}
    assert rows == {"health.rdma_error_counters": "PASS", "health.kernel_log": "PASS"}


def test_link_errors_on_node_2_fail_the_combo_naming_node_device_counter_and_delta(
        testbed_cluster, reports, tmp_path, node_roots):
    node2 = testbed_cluster.nodes[1].address
    sc, res, faulty, clean = run_with("link_errors@3", verify=True, testbed_cluster=testbed_cluster,
                                      reports=reports, tmp_path=tmp_path, node_roots=node_roots)
    assert res.code == 1, res.out[-3000:] + res.err[-3000:]
    bad = res.record("training", faulty)
    assert bad["status"] == "FAIL" and bad["data"]["completed"] is True
    assert f"node {node2}: rocep1s0f0 port 1 link_error_recovery +3" in bad["reason"]
    net = checks_of(bad)["rdma_error_counters"]
    assert [(r["node"], r["device"], r["port"], r["counter"], r["delta"]) for r in net["rows"]] == [
        (node2, "rocep1s0f0", "1", "link_error_recovery", 3)]
    assert checks_of(bad)["kernel_log"]["status"] == "PASS"
    assert res.record("metric", faulty)["status"] == "PASS", "the job's results stand; only health failed"
    assert_clean(res, clean)
    results = assert_run_dir_readable(res.run_dir)
    assert results["verdict"] == "FAIL"
    html = (res.run_dir / "report.html").read_text()
    assert "Health checks" in html and "link_error_recovery" in html and node2 in html
    assert_nothing_left(testbed_cluster, sc, res.run_dir.name)


def test_a_gpu_reset_in_the_kernel_log_fails_the_combo_naming_node_and_line(
        testbed_cluster, reports, tmp_path, node_roots):
    node2 = testbed_cluster.nodes[1].address
    sc, res, faulty, clean = run_with("gpu_reset@3,link_errors@4", verify=False, testbed_cluster=testbed_cluster,
                                      reports=reports, tmp_path=tmp_path, node_roots=node_roots)
    assert res.code == 1, res.out[-3000:] + res.err[-3000:]
    bad = res.record("training", faulty)
    assert bad["status"] == "FAIL"
    assert f"node {node2}: GPU reset: [" in bad["reason"] or f"node {node2}: ring timeout: [" in bad["reason"]
    kernel = checks_of(bad)["kernel_log"]
    resets = [r for r in kernel["rows"] if r["kind"] == "gpu_reset"]
    assert resets and resets[0]["node"] == node2
    assert resets[0]["line"].endswith("amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!")
    net = checks_of(bad)["rdma_error_counters"]
    assert net["status"] == "WARN" and "verify_network_errors is false" in net["summary"]
    assert_clean(res, clean)
    html = (res.run_dir / "report.html").read_text()
    assert "GPU reset begin!" in html
    assert_nothing_left(testbed_cluster, sc, res.run_dir.name)
