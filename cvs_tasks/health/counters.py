"""RDMA port counters: read them from a snapshot's text, keep the error ones, diff two snapshots.

Two sources give the same keys (device, port, counter): the sysfs tree
(``<dev>/ports/<port>/{counters,hw_counters}/<name>``, plus the device-level
``<dev>/hw_counters/<name>`` some drivers such as bnxt_re keep, port ``-``) as ``grep -H -r``
prints it, and ``rdma statistic show`` (``link <dev>/<port> <name> <value> ...``) where sysfs is
not readable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping

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
