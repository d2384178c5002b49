"""Per-node findings -> the two health checks of a job: RDMA error counters and the kernel log.

Each check has a status (PASS, FAIL, WARN: found something that does not fail the job or could
not look everywhere, SKIPPED: nothing to look at), a one-line summary and one row per finding,
naming the node and the device, port, counter and delta, or the kernel line.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from cvs_tasks.health.counters import CounterGrowth, diff_counters
from cvs_tasks.health.kernel import KernelFinding, scan_kernel_lines
from cvs_tasks.health.snapshot import Snapshot

NETWORK_CHECK = "rdma_error_counters"
KERNEL_CHECK = "kernel_log"
MAX_ROWS_PER_NODE = 20  # a flood of page-fault lines would drown the report; the count stays exact
MAX_SUMMARY_ITEMS = 3


@dataclass
class NodeHealth:
    """What one node's before/after snapshots say."""

    node: str
    growth: list[CounterGrowth] = field(default_factory=list)
    counter_ports: int = 0  # ports (or devices) whose counters were compared
    counters_problem: str | None = None  # why counters could not be compared
    counter_notes: list[str] = field(default_factory=list)
    kernel: list[KernelFinding] = field(default_factory=list)
    kernel_source: str | None = None
    kernel_problem: str | None = None


def node_health(node: str, before: Snapshot | None, after: Snapshot | None) -> NodeHealth:
    """Compare one node's snapshots; a missing or unusable snapshot becomes a problem, not a pass."""
    health = NodeHealth(node)
    bad = next((why for why in (
        "the snapshot before the job failed" if before is None else before.problem,
        "the snapshot after the job failed" if after is None else after.problem) if why), None)
    if bad or before is None or after is None:
        health.counters_problem = health.kernel_problem = bad
        return health
    if before.counter_source != after.counter_source:
        health.counters_problem = (f"the counters came from {before.counter_source} before the job and from "
                                   f"{after.counter_source} after it")
    else:
        health.growth, health.counter_notes = diff_counters(node, before.counters, after.counters)
        health.counter_ports = len({(k.device, k.port) for k in set(before.counters) & set(after.counters)})
    if after.klog_source is None:
        health.kernel_problem = f"the kernel log could not be read ({after.klog_error or 'no source worked'})"
    elif before.klog_source is not None and before.klog_mark is None:
        health.kernel_problem = ("the kernel log has no timestamped line (printk.time off?), so the job's "
                                 "lines cannot be told from older ones")
    elif before.klog_mark is None and before.uptime is None:
        health.kernel_problem = "the start of the job's window in the kernel log is unknown"
    else:
        health.kernel_source = after.klog_source
        health.kernel = scan_kernel_lines(node, after.klog_lines)
    return health


@dataclass
class HealthCheck:
    name: str
    status: str  # PASS, FAIL, WARN, SKIPPED
    summary: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    count: int = 0  # findings (grown counters, matching kernel lines), also those past the row cap

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _listing(items: Sequence[str], total: int) -> str:
    shown = "; ".join(items[:MAX_SUMMARY_ITEMS])
    return shown + (f"; and {total - MAX_SUMMARY_ITEMS} more" if total > MAX_SUMMARY_ITEMS else "")


def network_check(nodes: Sequence[NodeHealth], enforce: bool) -> HealthCheck:
    growth = [g for n in nodes for g in n.growth]
    unchecked = [f"node {n.node}: {n.counters_problem}" for n in nodes if n.counters_problem]
    notes = unchecked + [note for n in nodes for note in n.counter_notes]
    if growth:
        rows = [{"status": "FAIL" if enforce else "WARN", "node": g.node, "device": g.device, "port": g.port,
                 "counter": g.counter, "kind": g.kind, "before": g.before, "after": g.after, "delta": g.delta}
                for g in growth]
        how = "" if enforce else " (warning only: verify_network_errors is false)"
        summary = (f"{len(growth)} RDMA error counter(s) grew during the job{how}: "
                   + _listing([g.describe() for g in growth], len(growth)))
        return HealthCheck(NETWORK_CHECK, "FAIL" if enforce else "WARN", summary, rows, notes, len(growth))
    ports = sum(n.counter_ports for n in nodes)
    if unchecked:
        return HealthCheck(NETWORK_CHECK, "WARN", "RDMA error counters not compared on "
                           + _listing(unchecked, len(unchecked)), [], notes)
    if ports == 0:
        return HealthCheck(NETWORK_CHECK, "SKIPPED", "no RDMA port counters on any node "
                           "(no /sys/class/infiniband device and no `rdma statistic` output)", [], notes)
    return HealthCheck(NETWORK_CHECK, "PASS", f"no RDMA error counter grew ({ports} port(s) on "
                       f"{len(nodes)} node(s))", [], notes)


def kernel_check(nodes: Sequence[NodeHealth]) -> HealthCheck:
    findings = [f for n in nodes for f in n.kernel]
    unread = [f"node {n.node}: {n.kernel_problem}" for n in nodes if n.kernel_problem]
    rows: list[dict[str, Any]] = []
    for n in nodes:
        for f in n.kernel[:MAX_ROWS_PER_NODE]:
            rows.append({"status": "FAIL" if f.severity == "fail" else "WARN", "node": f.node, "kind": f.rule,
                         "what": f.what, "line": f.line})
    fatal = [f for f in findings if f.severity == "fail"]
    if fatal:
        summary = f"{len(fatal)} amdgpu fault line(s) in the kernel log during the job: " + _listing(
            [f.describe() for f in fatal], len(fatal))
        return HealthCheck(KERNEL_CHECK, "FAIL", summary, rows, unread, len(findings))
    if findings:
        summary = f"{len(findings)} amdgpu warning line(s) in the kernel log: " + _listing(
            [f.describe() for f in findings], len(findings))
        return HealthCheck(KERNEL_CHECK, "WARN", summary, rows, unread, len(findings))
    if unread:
        return HealthCheck(KERNEL_CHECK, "WARN", "kernel log not checked on " + _listing(unread, len(unread)),
                           [], unread)
    sources = sorted({n.kernel_source for n in nodes if n.kernel_source})
    return HealthCheck(KERNEL_CHECK, "PASS", f"no amdgpu fault in the kernel log of {len(nodes)} node(s) "
                       f"during the job (read with {', '.join(sources)})", [], [])


def judge_health(nodes: Sequence[NodeHealth], *, enforce_network: bool) -> list[HealthCheck]:
    """The job's two checks; a kernel fault always fails, counter growth only when enforced."""
    return [network_check(nodes, enforce_network), kernel_check(nodes)]
