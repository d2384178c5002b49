"""Network and GPU health around a training job: one node's snapshot text in, the job's two checks
out (RDMA error counters, the amdgpu kernel log). Pure; the command that takes a snapshot on a node
is `cvs_tasks.remote.health`.

A snapshot is sections introduced by ``@@`` lines::

    @@cvs-health 1
    @@uptime 8123.45
    @@counters sysfs            (or rdma, or none)
    mlx5_0/ports/1/counters/port_rcv_errors:0
    @@klog dmesg                (or "sudo dmesg", journalctl; @@klog-error <why> when none works)
    @@klog-mark 8120.001234     (before the job: the newest kernel-log stamp)
    [ 8130.5] amdgpu ...        (after the job: the lines past the mark)
    @@end                       (missing: the output was cut short, the snapshot is not used)

RDMA port counters: two sources give the same keys (device, port, counter): the sysfs tree
(``<dev>/ports/<port>/{counters,hw_counters}/<name>``, plus the device-level ``<dev>/hw_counters/<name>``
some drivers such as bnxt_re keep, port ``-``) as ``grep -H -r`` prints it, and ``rdma statistic
show`` (``link <dev>/<port> <name> <value> ...``) where sysfs is not readable. The error ones that
grew between the two snapshots of a node are findings.

Kernel log: one ordered table of amdgpu rules, the first that matches wins. Only lines that name the
amdgpu driver are looked at (``amdgpu 0000:c1:00.0: amdgpu: ...``, ``[drm:amdgpu_job_timedout
[amdgpu]] *ERROR* ...``), so a NIC or filesystem message can never be mistaken for a GPU fault.
Informational amdgpu lines (``XGMI: Add node``, ``RAS: optional ras ta ucode is not available``)
match no rule.

Each check has a status (PASS, FAIL, WARN: found something that does not fail the job or could not
look everywhere, SKIPPED: nothing to look at), a summary line and one row per finding.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Literal, Mapping, Sequence

# --- RDMA port counters -------------------------------------------------------------------------
# The reference's pattern (ROCm CVS): a counter whose name says it counts trouble.
ERROR_COUNTER_PATTERN = r"err|retransmit|drop|discard|naks|invalid|oflow|out_of_buffer|reset|fail"
_ERROR_RX = re.compile(ERROR_COUNTER_PATTERN, re.IGNORECASE)
DEVICE_LEVEL = "-"  # port of a device-level hw_counter


@dataclass(frozen=True, order=True)
class CounterKey:
    device: str
    port: str
    kind: str  # "counters", "hw_counters" or "rdma" (from `rdma statistic`)
    name: str


@dataclass(frozen=True)
class CounterGrowth:
    """An error counter that grew on one node during the job."""

    node: str
    device: str
    port: str
    counter: str
    kind: str
    before: int
    after: int

    @property
    def delta(self) -> int:
        return self.after - self.before

    def describe(self) -> str:
        return (f"node {self.node}: {self.device} port {self.port} {self.counter} "
                f"+{self.delta} ({self.before} -> {self.after})")


def is_error_counter(name: str) -> bool:
    return bool(_ERROR_RX.search(name))


def _int(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() else None


def parse_sysfs_counters(lines: Iterable[str]) -> dict[CounterKey, int]:
    """``mlx5_0/ports/1/counters/port_rcv_errors:3`` lines (paths relative to the class folder)."""
    out: dict[CounterKey, int] = {}
    for line in lines:
        path, sep, value = line.rpartition(":")
        number = _int(value) if sep else None
        if number is None:
            continue  # unreadable or non-numeric attribute (e.g. a driver's text file)
        parts = path.strip().lstrip("./").split("/")
        if len(parts) == 5 and parts[1] == "ports" and parts[3] in ("counters", "hw_counters"):
            key = CounterKey(parts[0], parts[2], parts[3], parts[4])
        elif len(parts) == 3 and parts[1] == "hw_counters":
            key = CounterKey(parts[0], DEVICE_LEVEL, "hw_counters", parts[2])
        else:
            continue
        out[key] = number
    return out


def parse_rdma_statistic(lines: Iterable[str]) -> dict[CounterKey, int]:
    """``rdma statistic show`` output: ``link mlx5_0/1 rx_write_requests 0 out_of_buffer 2 ...``."""
    out: dict[CounterKey, int] = {}
    for line in lines:
        words = line.split()
        if len(words) < 2 or words[0] != "link" or "/" not in words[1]:
            continue
        device, _, port = words[1].partition("/")
        pairs = words[2:]
        for name, value in zip(pairs[0::2], pairs[1::2]):
            number = _int(value)
            if number is not None:
                out[CounterKey(device, port, "rdma", name)] = number
    return out


def diff_counters(node: str, before: Mapping[CounterKey, int],
                  after: Mapping[CounterKey, int]) -> tuple[list[CounterGrowth], list[str]]:
    """Error counters that grew between two snapshots of one node, and notes on what could not
    be compared (a counter that went down: a driver reload or a reset of the counters)."""
    grew: list[CounterGrowth] = []
    notes: list[str] = []
    for key in sorted(set(before) & set(after)):
        if not is_error_counter(key.name):
            continue
        old, new = before[key], after[key]
        if new > old:
            grew.append(CounterGrowth(node, key.device, key.port, key.name, key.kind, old, new))
        elif new < old:
            notes.append(f"node {node}: {key.device} port {key.port} {key.name} went down ({old} -> {new}); "
                         "the counters were reset during the job, growth cannot be judged")
    return grew, notes


# --- amdgpu faults in the kernel log ------------------------------------------------------------
Severity = Literal["fail", "warn"]
_AMDGPU = re.compile(r"amdgpu", re.IGNORECASE)
_TIMESTAMP = re.compile(r"^\[\s*(\d+\.\d+)\]\s?")


@dataclass(frozen=True)
class KernelRule:
    name: str
    severity: Severity
    what: str
    pattern: re.Pattern[str]


def _rule(name: str, severity: Severity, what: str, pattern: str) -> KernelRule:
    return KernelRule(name, severity, what, re.compile(pattern, re.IGNORECASE))


KERNEL_RULES: tuple[KernelRule, ...] = (
    _rule("gpu_reset", "fail", "GPU reset",
          r"GPU reset|gpu_recover|GPU recovery disabled|MODE[12] reset|BACO reset|ASIC reset|"
          r"GPU hang|cp might be in an unrecoverable state"),
    _rule("ring_timeout", "fail", "ring timeout",
          r"\bring \S+ timeout|amdgpu_job_timedout|fence wait loop timeout|preemption time ?out"),
    _rule("page_fault", "fail", "GPU page fault",
          r"page fault|PROTECTION_FAULT_STATUS|Illegal register access"),
    _rule("ras_correctable", "warn", "RAS correctable error",
          r"(?<!un)correctable (hardware )?errors? detected"),
    _rule("xgmi_error", "fail", "XGMI error", r"xgmi.*(error|fail)|(error|fail).*xgmi"),
    _rule("ras_uncorrectable", "fail", "RAS uncorrectable error",
          r"uncorrectable|poison (consumption|created|detected)|ERR_FATAL"),
    _rule("driver_fatal", "fail", "amdgpu fatal error", r"fatal error"),
)


@dataclass(frozen=True)
class KernelFinding:
    """One kernel-log line of one node that a rule matched."""

    node: str
    rule: str
    severity: Severity
    what: str
    line: str

    def describe(self) -> str:
        return f"node {self.node}: {self.what}: {self.line}"


def classify_line(line: str) -> KernelRule | None:
    """The first rule that matches an amdgpu line, or None."""
    if not _AMDGPU.search(line):
        return None
    text = _TIMESTAMP.sub("", line, count=1)
    for rule in KERNEL_RULES:
        if rule.pattern.search(text):
            return rule
    return None


def scan_kernel_lines(node: str, lines: Iterable[str]) -> list[KernelFinding]:
    """Every matching line of one node's kernel log window, in log order."""
    found = []
    for raw in lines:
        line = raw.rstrip("\r\n")
        rule = classify_line(line)
        if rule is not None:
            found.append(KernelFinding(node, rule.name, rule.severity, rule.what, line.strip()))
    return found


def line_time(line: str) -> float | None:
    """The ``[  123.456789]`` seconds-since-boot stamp that dmesg and ``journalctl -o
    short-monotonic`` put first, or None."""
    m = _TIMESTAMP.match(line)
    return float(m.group(1)) if m else None


# --- one node's snapshot ------------------------------------------------------------------------
HEADER = "@@cvs-health 1"
END = "@@end"


@dataclass
class Snapshot:
    uptime: float | None = None
    counter_source: str = "none"  # sysfs, rdma or none
    counters: dict[CounterKey, int] = field(default_factory=dict)
    klog_source: str | None = None  # dmesg, sudo dmesg, journalctl; None: not read
    klog_error: str | None = None
    klog_mark: float | None = None
    klog_lines: list[str] = field(default_factory=list)
    problem: str | None = None  # why this snapshot cannot be used at all


def _float(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if value >= 0 else None


def parse_snapshot(text: str) -> Snapshot:
    lines = text.splitlines()
    snap = Snapshot()
    try:
        start = lines.index(HEADER)
    except ValueError:
        snap.problem = "the health snapshot printed nothing usable (no header line)"
        return snap
    if END not in lines[start:]:
        snap.problem = "the health snapshot output was cut short"
        return snap
    section, counter_lines = "", []
    for line in lines[start + 1:]:
        if line == END:
            break
        if line.startswith("@@"):
            word, _, rest = line[2:].partition(" ")
            rest = rest.strip()
            if word == "uptime":
                snap.uptime = _float(rest)
            elif word == "counters":
                snap.counter_source = rest or "none"
                section = "counters"
            elif word == "klog":
                snap.klog_source = rest or None
                section = "klog"
            elif word == "klog-error":
                snap.klog_error = rest or "the kernel log could not be read"
                section = ""
            elif word == "klog-mark":
                snap.klog_mark = _float(rest) if rest else None
            continue
        if section == "counters":
            counter_lines.append(line)
        elif section == "klog" and line.strip():
            snap.klog_lines.append(line)
    if snap.counter_source == "sysfs":
        snap.counters = parse_sysfs_counters(counter_lines)
    elif snap.counter_source == "rdma":
        snap.counters = parse_rdma_statistic(counter_lines)
    return snap


# --- the job's two checks -----------------------------------------------------------------------
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
