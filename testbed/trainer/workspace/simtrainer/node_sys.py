"""A testbed node's stand-ins for the hardware the harness's health check reads.

Each node has a folder ``<SIM_NODE_SYS>/node<N>`` (default: under the shared folder every
testbed config mounts, so the trainer in the container can write it) holding an
``infiniband/`` tree shaped like ``/sys/class/infiniband`` (the node's sshd shows it there) and
``kmsg``, the kernel log the node's ``dmesg`` stand-in prints. Faults make counters grow and
append amdgpu lines; outside a testbed node (no folder) every call does nothing.
"""
from __future__ import annotations

import os
from pathlib import Path

from .node_facts import node_index

SHARED_NODE_SYS = "/tmp/cvs-testbed/shared/node-sys"
DEVICES = ("rocep0s0f0", "rocep1s0f0")
PORT_COUNTERS = ("excessive_buffer_overrun_errors", "link_downed", "link_error_recovery",
                 "local_link_integrity_errors", "port_rcv_data", "port_rcv_errors", "port_rcv_packets",
                 "port_xmit_data", "port_xmit_discards", "port_xmit_packets", "symbol_error", "VL15_dropped")
HW_COUNTERS = ("rx_roce_discards", "rx_roce_errors", "seq_err_naks_rcvd", "to_retransmits", "tx_roce_discards",
               "rx_roce_good_bytes", "tx_roce_pkts")
LINK_ERROR = ("rocep1s0f0", "1", "counters", "link_error_recovery")


def folder(env: dict | None = None, index: int | None = None) -> Path | None:
    env = os.environ if env is None else env
    index = node_index() if index is None else index
    if index is None:
        return None
    path = Path(env.get("SIM_NODE_SYS") or SHARED_NODE_SYS) / f"node{index}"
    return path if path.is_dir() else None


def seed(path: Path) -> None:
    """Create a node's tree (zero counters) and kernel log when missing; existing values stay."""
    for device in DEVICES:
        port = path / "infiniband" / device / "ports" / "1"
        for kind, names in (("counters", PORT_COUNTERS), ("hw_counters", HW_COUNTERS)):
            (port / kind).mkdir(parents=True, exist_ok=True)
            for name in names:
                counter = port / kind / name
                if not counter.exists():
                    counter.write_text("0\n")
    kmsg = path / "kmsg"
    if not kmsg.exists():
        kmsg.write_text("[    0.000000] Linux version 6.8.0-cvs-testbed (stand-in kernel log)\n"
                        "[    5.120000] [drm] Initialized amdgpu 3.57.0 20150101 for 0000:c1:00.0 on minor 1\n")


def bump(path: Path | None, device: str, port: str, kind: str, name: str, by: int) -> None:
    """Add to one counter, replacing the file atomically (the harness may read it meanwhile)."""
    if path is None:
        return
    counter = path / "infiniband" / device / "ports" / port / kind / name
    try:
        value = int(counter.read_text().strip() or 0)
    except (OSError, ValueError):
        return
    tmp = counter.with_name(f".{name}.{os.getpid()}")
    tmp.write_text(f"{value + by}\n")
    tmp.replace(counter)


def uptime() -> float:
    """Seconds since boot: the clock of the kernel log's stamps (the container shares the host's)."""
    try:
        return float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0


def kernel_lines(path: Path | None, texts: list[str]) -> None:
    """Append lines to the node's kernel log, stamped now as dmesg stamps them."""
    if path is None:
        return
    stamp = uptime()
    with open(path / "kmsg", "a", encoding="utf-8") as fh:
        for text in texts:
            fh.write(f"[{stamp:12.6f}] {text}\n")
