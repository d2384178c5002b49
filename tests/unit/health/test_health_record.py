"""What the checks do to a job's record and to the report's health table."""

from cvs_tasks.health import HealthCheck
from cvs_tasks.lifecycle.health import apply_health
from cvs_tasks.report.nodes import health_rows
from cvs_tasks.run import StageRecord

GROWTH = HealthCheck("rdma_error_counters", "FAIL", "1 RDMA error counter(s) grew during the job: node n2: ...",
                     [{"status": "FAIL", "node": "n2", "device": "bnxt_re1", "port": "1",
                       "counter": "link_error_recovery", "kind": "counters", "before": 0, "after": 3, "delta": 3}],
                     [], 1)
QUIET_KERNEL = HealthCheck("kernel_log", "PASS", "no amdgpu fault in the kernel log of 2 node(s) during the job")


def test_a_failing_check_fails_a_passing_record_and_marks_why():
    record = StageRecord(stage="training", status="PASS", combo="MBS=1,GBS=8,PRECISION=BF16", reason="20/20")
    apply_health(record, [GROWTH, QUIET_KERNEL])
    assert record.status == "FAIL" and record.reason == GROWTH.summary
    assert record.data["failed_by"] == "health"
    assert [(m.name, m.value, m.status) for m in record.metrics] == [
        ("health.rdma_error_counters", 1, "FAIL"), ("health.kernel_log", 0, "PASS")]
    assert record.data["health"]["checks"][0]["rows"][0]["delta"] == 3


def test_a_failed_job_keeps_its_own_reason_first():
    record = StageRecord(stage="training", status="FAIL", reason="gpu_fault on node n2")
    apply_health(record, [GROWTH])
    assert record.reason.startswith("gpu_fault on node n2; 1 RDMA error counter(s) grew")
    assert "failed_by" not in record.data


def test_warnings_do_not_change_the_status():
    record = StageRecord(stage="smoke", status="PASS", reason="ok")
    warn = HealthCheck("rdma_error_counters", "WARN", "grew (warning only)", [], [], 2)
    apply_health(record, [warn, QUIET_KERNEL])
    assert record.status == "PASS" and record.metrics[0].status == "RECORD"


def test_the_report_table_has_a_row_per_finding_or_per_check():
    rows = health_rows({"health": {"checks": [GROWTH.to_dict(), QUIET_KERNEL.to_dict()]}})
    assert rows[0] == {"check": "RDMA error counters", "status": "FAIL", "node": "n2", "device": "bnxt_re1",
                       "port": "1", "counter": "link_error_recovery", "delta": "+3", "text": "0 -> 3"}
    assert rows[1]["check"] == "Kernel log (amdgpu)" and rows[1]["status"] == "PASS"
    assert health_rows({}) == [] and health_rows({"health": {"checks": "junk"}}) == []
