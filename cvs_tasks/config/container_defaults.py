"""What every docker container of a run gets unless the config says otherwise, and why.

One table; `merge_defaults` adds each row to the suite's ``container.runtime.args`` (as a plain
dict) where the config does not already provide it: a scalar the config sets wins, a list entry
with the same identity (device path, ulimit name, capability, security option kind, group) is
the config's, and ``runtime.args.omit_defaults`` lists rows to leave out (a node without
``/dev/infiniband``, the GPU-less testbed). `config.show` prints the table with what became of
each row; the packaged templates spell them out.

Not defaults, on purpose: ``--group-add render`` (the name must exist in the image's
/etc/group and Ubuntu/Debian base images have no ``render`` group, so docker would refuse to
start; jobs run as root, which needs neither group), and ``--shm-size`` while ``ipc`` is
``host`` (the host's /dev/shm is used and the flag does nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

SHM_SIZE = "64g"


@dataclass(frozen=True)
class ContainerDefault:
    key: str  # the runtime.args field
    value: Any
    reason: str

    @property
    def id(self) -> str:
        """How `omit_defaults` names the row: the field, and for list fields the entry's identity."""
        if isinstance(self.value, str) and self.key in LIST_KEYS:
            return f"{self.key}:{_identity(self.key, self.value)}"
        return self.key

    @property
    def flag(self) -> str:
        return f"{FLAGS[self.key]} {self.value}" if self.key != "privileged" else "--privileged"


FLAGS = {"network": "--network", "ipc": "--ipc", "privileged": "--privileged", "shm_size": "--shm-size",
         "devices": "--device", "group_add": "--group-add", "ulimit": "--ulimit", "cap_add": "--cap-add",
         "security_opt": "--security-opt"}
LIST_KEYS = frozenset({"devices", "group_add", "ulimit", "cap_add", "security_opt"})
NODE_NAMESPACE = "host"  # docker's --network / --ipc value: share the node's own (not the host runtime)

CONTAINER_DEFAULTS: tuple[ContainerDefault, ...] = (
    ContainerDefault("network", NODE_NAMESPACE,
                     "RCCL and the trainers' rendezvous use the node's own NICs and addresses"),
    ContainerDefault("ipc", NODE_NAMESPACE, "a node's ranks share memory through /dev/shm; the host's is not capped at "
                                            "Docker's 64 MB"),
    ContainerDefault("privileged", True, "the NIC library copy and GPU/NIC settings write where an unprivileged "
                                         "container may not (as the reference runs)"),
    ContainerDefault("shm_size", SHM_SIZE, "only when ipc is not host: a private /dev/shm must hold the ranks' "
                                           "shared buffers"),
    ContainerDefault("devices", "/dev/kfd", "ROCm's compute interface: without it no GPU is visible"),
    ContainerDefault("devices", "/dev/dri", "the GPUs' render nodes, opened by ROCm for every GPU"),
    ContainerDefault("devices", "/dev/infiniband", "RDMA verbs and rdma_cm devices that RCCL's IB/RoCE "
                                                   "transport opens"),
    ContainerDefault("group_add", "video", "owner group of /dev/kfd and /dev/dri on ROCm hosts, for an image "
                                           "that runs as a non-root user"),
    ContainerDefault("ulimit", "memlock=-1", "RDMA registers (pins) GPU and host buffers; a capped "
                                             "locked-memory limit makes registration fail"),
    ContainerDefault("cap_add", "IPC_LOCK", "lets the job lock memory for RDMA registration when not privileged"),
    ContainerDefault("cap_add", "SYS_PTRACE", "HIP's inter-process GPU memory handles and ROCm debuggers "
                                              "read other processes' memory"),
    ContainerDefault("security_opt", "seccomp=unconfined", "Docker's seccomp profile blocks the NUMA "
                                                           "memory-policy calls (mbind, set_mempolicy) ROCm uses"),
)
def _identity(key: str, value: str) -> str:
    """Two entries with the same identity are the same setting (the config's one wins)."""
    text = str(value).strip()
    if key == "devices":
        return text.split(":", 1)[0].rstrip("/")
    if key == "ulimit":
        return text.split("=", 1)[0].strip()
    if key == "cap_add":
        upper = text.upper()
        return upper[4:] if upper.startswith("CAP_") else upper
    if key == "security_opt":
        return text.replace(":", "=", 1).split("=", 1)[0]
    return text


DEFAULT_IDS: tuple[str, ...] = tuple(d.id for d in CONTAINER_DEFAULTS)


def _provided_device(default: str, args: Mapping[str, Any]) -> str | None:
    """The config entry that already gives the container ``default`` (itself, a device under it,
    or a volume mounted at it), or None."""
    for device in args.get("devices") or []:
        path = _identity("devices", device)
        if path == default or path.startswith(default + "/"):
            return str(device)
    for volume in args.get("volumes") or []:
        parts = str(volume).split(":")
        if len(parts) >= 2 and parts[1].rstrip("/") == default:
            return f"volume {volume}"
    return None


def _provided(d: ContainerDefault, args: Mapping[str, Any]) -> str | None:
    if d.key not in LIST_KEYS:
        value = args.get(d.key)
        return None if value is None else repr(value)
    if d.key == "devices":
        return _provided_device(d.value, args)
    entries = args.get(d.key) or []
    if d.key == "cap_add" and any(_identity("cap_add", e) == "ALL" for e in entries):
        return "ALL"
    wanted = _identity(d.key, d.value)
    return next((str(e) for e in entries if _identity(d.key, e) == wanted), None)


def _as_list(value: Any) -> Any:
    if isinstance(value, Mapping):  # ulimit {"memlock": -1}
        return [f"{k}={v}" for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value] if isinstance(value, str) else value


def merge_defaults(args: Mapping[str, Any] | None) -> tuple[dict[str, Any], list[tuple[ContainerDefault, str]]]:
    """The runtime args with the defaults added, and for each default what became of it:
    ``added``, ``in config`` (same value), ``config: <value>`` (the config's differs and wins),
    ``omitted`` (omit_defaults) or ``not needed`` (shm_size with ipc host)."""
    merged: dict[str, Any] = {k: _as_list(v) if k in LIST_KEYS else v for k, v in (args or {}).items()}
    omit = {str(x) for x in merged.get("omit_defaults") or []}
    outcomes: list[tuple[ContainerDefault, str]] = []
    for d in CONTAINER_DEFAULTS:
        if d.id in omit:
            outcomes.append((d, "omitted"))
            continue
        ipc = merged.get("ipc") or NODE_NAMESPACE
        if d.key == "shm_size" and merged.get("shm_size") is None and ipc == NODE_NAMESPACE:
            outcomes.append((d, "not needed (ipc host)"))
            continue
        given = _provided(d, merged)
        if given is not None:
            same = given in (repr(d.value), str(d.value))
            outcomes.append((d, "in config" if same else f"config: {given}"))
            continue
        if d.key in LIST_KEYS:
            merged[d.key] = list(merged.get(d.key) or []) + [d.value]
        else:
            merged[d.key] = d.value
        outcomes.append((d, "added"))
    return merged, outcomes


def describe_defaults(args: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """For `config.show`: each default's flag, reason and what became of it."""
    return [{"flag": d.flag, "id": d.id, "status": status, "reason": d.reason} for d, status in merge_defaults(args)[1]]
