"""One node's health snapshot, as the command of `cvs_tasks.remote.health` prints it.

The output is sections introduced by ``@@`` lines::

    @@cvs-health 1
    @@uptime 8123.45
    @@counters sysfs            (or rdma, or none)
    mlx5_0/ports/1/counters/port_rcv_errors:0
    @@klog dmesg                (or "sudo dmesg", journalctl; @@klog-error <why> when none works)
    @@klog-mark 8120.001234     (before the job: the newest kernel-log stamp)
    [ 8130.5] amdgpu ...        (after the job: the lines past the mark)
    @@end

A missing ``@@end`` means the output was cut short: the snapshot is then not used.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cvs_tasks.health.counters import CounterKey, parse_rdma_statistic, parse_sysfs_counters

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
