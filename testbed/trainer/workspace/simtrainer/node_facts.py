"""Per-node versions and faults of a testbed node (the stand-ins for tools and hardware that differ).

A node is told apart by ``CVS_SIM_NODE_DIR`` (its state folder, set by the node's sshd for host
shells) or, inside a container, by the node's own dockerd data root that shows in the container's
mount table (``…/nodes/node<N>/data/…``). ``versions.env`` in that folder (KEY=VALUE) overrides
the defaults below (amd-smi and ibv_devinfo read it too); ``fault`` in ``<SIM_NODE_FAULTS>/node<N>``
(default: the shared folder every testbed config mounts) holds that node's own SIM_FAULT entries,
e.g. ``slow=1.5`` or ``crash@3``.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

DEFAULTS = {
    "gpu_model": "AMD Instinct MI300X",
    "gpu_count": 8,
    "rocm": "6.4.1",
    "driver": "6.10.5",
    "fw_mec": "177",
    "fw_sos": "00.36.02.59",
    "nic_fw": "230.0.157.0",
}
SHARED_FAULTS = "/tmp/cvs-testbed/shared/node-faults"
NODE_RX = re.compile(r"/nodes/node(\d+)/")


def node_index(mountinfo: str | None = None) -> int | None:
    """This node's index, from CVS_SIM_NODE_DIR or from the container's mount table."""
    folder = os.environ.get("CVS_SIM_NODE_DIR", "")
    m = NODE_RX.search(folder.rstrip("/") + "/")
    if m:
        return int(m.group(1))
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return None
    m = NODE_RX.search(mountinfo)
    return int(m.group(1)) if m else None


def versions() -> dict:
    """The node's versions: the defaults, then ``versions.env`` (KEY=VALUE lines, as amd-smi reads it)."""
    facts = dict(DEFAULTS)
    folder = os.environ.get("CVS_SIM_NODE_DIR")
    if folder:
        try:
            for line in (Path(folder) / "versions.env").read_text().splitlines():
                key, sep, value = line.partition("=")
                if sep and key.strip().lower() in facts:
                    facts[key.strip().lower()] = value.strip()
        except OSError:
            pass
    return facts


def node_fault(env: dict | None = None) -> str:
    """This node's own fault entries ('' when none)."""
    env = os.environ if env is None else env
    index = node_index()
    if index is None:
        return ""
    try:
        return (Path(env.get("SIM_NODE_FAULTS") or SHARED_FAULTS) / f"node{index}").read_text().strip()
    except OSError:
        return ""
