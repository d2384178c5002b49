"""Network and GPU health around a training job (pure: snapshot text in, findings and verdicts out).

`counters` reads and diffs RDMA port counters, `kernel` classifies amdgpu kernel-log lines,
`snapshot` splits one node's snapshot output into its parts, `verdict` turns the per-node
findings into the check rows a record and a report show. The command that takes a snapshot on
a node lives in `cvs_tasks.remote.health`.
"""

from cvs_tasks.health.counters import (
    ERROR_COUNTER_PATTERN,
    CounterGrowth,
    CounterKey,
    diff_counters,
    is_error_counter,
    parse_rdma_statistic,
    parse_sysfs_counters,
)
from cvs_tasks.health.kernel import KERNEL_RULES, KernelFinding, KernelRule, classify_line, scan_kernel_lines
from cvs_tasks.health.snapshot import Snapshot, parse_snapshot
from cvs_tasks.health.verdict import HealthCheck, NodeHealth, judge_health, node_health

__all__ = [
    "ERROR_COUNTER_PATTERN", "CounterGrowth", "CounterKey", "diff_counters", "is_error_counter",
    "parse_rdma_statistic", "parse_sysfs_counters", "KERNEL_RULES", "KernelFinding", "KernelRule",
    "classify_line", "scan_kernel_lines", "Snapshot", "parse_snapshot", "HealthCheck", "NodeHealth",
    "judge_health", "node_health",
]
