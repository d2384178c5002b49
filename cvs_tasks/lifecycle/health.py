"""Health snapshots around a training job and what they do to the job's record.

Before the job: one snapshot per node (RDMA counters, the kernel-log mark). After it: one more,
judged by `cvs_tasks.health`. A check that fails turns a passing record into FAIL (the job's
results stay, so the metric and loss rows are still judged); a snapshot that cannot be taken
is a warning in the record, never a crash of the stage.
"""

from __future__ import annotations

from typing import Sequence

from cvs_tasks.health import HealthCheck, Snapshot, judge_health, node_health, parse_snapshot
from cvs_tasks.lifecycle.session import Session
from cvs_tasks.remote.health import take_snapshots
from cvs_tasks.run import MetricRow, StageRecord

ROW_STATUS = {"PASS": "PASS", "FAIL": "FAIL", "WARN": "RECORD", "SKIPPED": "SKIPPED"}
EXPECTED = {"rdma_error_counters": "no error counter grows", "kernel_log": "no amdgpu fault line"}
UNITS = {"rdma_error_counters": "counters", "kernel_log": "lines"}
FAILED_BY_HEALTH = "health"


def _snapshots(session: Session, starts: Sequence[float | None] | None) -> list[Snapshot]:
    count = len(session.plan.hosts)
    try:
        results = take_snapshots(session.hosts(), starts)
    except Exception as exc:  # noqa: BLE001 - a health snapshot never takes the stage down
        return [Snapshot(problem=f"the health snapshot could not run: {exc}") for _ in range(count)]
    snaps = []
    for r in results:
        if r.ok:
            snaps.append(parse_snapshot(r.stdout))
        else:
            detail = r.error or session.redactor(r.stderr or r.stdout).strip()[-200:] or f"exit {r.exit_code}"
            snaps.append(Snapshot(problem=f"the health snapshot failed: {detail}"))
    return snaps


def before_job(session: Session) -> list[Snapshot]:
    return _snapshots(session, None)


def after_job(session: Session, before: Sequence[Snapshot]) -> list[HealthCheck]:
    starts = [None if b.problem else (b.klog_mark if b.klog_mark is not None else b.uptime) for b in before]
    after = _snapshots(session, starts)
    nodes = [node_health(host.address, b, a) for host, b, a in zip(session.plan.hosts, before, after)]
    return judge_health(nodes, enforce_network=session.config.verify_network_errors)


def apply_health(record: StageRecord, checks: Sequence[HealthCheck], *, phase: str = "") -> None:
    """Record the checks (data, one metric row each) and fail a passing record on a FAIL check."""
    if not checks:
        return
    key = f"health_{phase}" if phase else "health"
    record.data[key] = {"checks": [c.to_dict() for c in checks]}
    for c in checks:
        record.metrics.append(MetricRow(name=f"health.{phase + '.' if phase else ''}{c.name}", value=c.count,
                                        unit=UNITS.get(c.name, ""), expected=EXPECTED.get(c.name, "-"),
                                        status=ROW_STATUS.get(c.status, "RECORD"), reason=c.summary))
    failing = [c.summary for c in checks if c.status == "FAIL"]
    if not failing:
        return
    text = "; ".join(failing)
    if phase:
        text = f"{phase} phase: {text}"
    if record.status == "PASS":
        record.status = "FAIL"
        record.reason = text
        record.data["failed_by"] = FAILED_BY_HEALTH
    else:
        record.reason = f"{record.reason}; {text}" if record.reason else text
