"""`invoke demo --fault NAME` end to end on the host runtime: each fault ends the demo in a failing
report with exit 1, only the combo it hits fails, and the shipped demo config is left as it was."""

from __future__ import annotations

import hashlib
import json
import time

import pytest

from tests.e2e.conftest import REPO, run_invoke

DEMO = REPO / "configs" / "testbed" / "demo_host.json"
HEALTHY, FAULTY = json.loads(DEMO.read_text())["sweep"]["runs"]  # the fault hits the FP8 combo


def check_oom(res):
    error = res.record("training", FAULTY)["data"]["error"]
    assert error["cls"] == "oom" and "HIP out of memory" in error["text"], error


def check_nan(res):
    bad = res.record("training", FAULTY)
    assert bad["data"]["error"]["cls"] == "nan", bad["data"]["error"]
    assert bad["data"]["last_step"] == 5, bad["data"]["last_step"]  # stopped at the NaN, not run out


def check_hang(res):
    reason = res.record("training", FAULTY)["reason"]
    assert "no new iteration for 5s" in reason and "4/20" in reason, reason


def check_slow_node(res):
    assert res.record("training", FAULTY)["status"] == "PASS"  # it trained, slowly
    metric = res.record("metric", FAULTY)
    assert metric["status"] == "FAIL"
    for gate in ("training.elapsed_time_per_iteration", "training.throughput_per_gpu"):
        assert gate in metric["reason"], metric["reason"]


CASES = {"oom": check_oom, "nan": check_nan, "hang": check_hang, "slow-node": check_slow_node}


@pytest.mark.parametrize("fault", list(CASES))
def test_demo_with_a_fault_ends_in_a_failing_report(fault, reports):
    digest = hashlib.sha256(DEMO.read_bytes()).hexdigest()
    started = time.monotonic()
    res = run_invoke("demo", "--fault", fault, reports=reports, timeout=300)
    took = time.monotonic() - started
    assert res.code == 1, res.out[-3000:] + res.err
    assert res.out.startswith(f"demo: fault {fault} in combo {FAULTY}"), res.out[:500]
    CASES[fault](res)
    failed = [t["name"] for t in res.results()["tests"] if t["status"] != "PASS" and t["status"] != "SKIPPED"]
    stage = "test_metric" if fault == "slow-node" else "test_training"
    assert failed[0] == f"{stage}[{FAULTY}]", failed
    assert res.record("training", HEALTHY)["status"] == "PASS"
    assert res.record("teardown")["status"] == "PASS"
    assert res.results()["verdict"] == "FAIL"
    assert "What failed first" in (res.run_dir / "report.html").read_text()
    manifest = json.loads((res.run_dir / "run.json").read_text())
    copy = reports.resolve() / "demo-configs" / f"demo_host_{fault.replace('-', '_')}.json"
    assert manifest["config_file"] == str(copy)
    assert hashlib.sha256(DEMO.read_bytes()).hexdigest() == digest
    assert took < 60, f"the {fault} demo took {took:.0f} s"
