"""File descriptors: the soft limit raised to the hard one once, and a run that cannot fit refused.

Each SSH node holds its connection's socket, a follower channel's pipe and a command channel's
pipe, plus the local copy of its log while a job runs; a node on this machine holds its
follower's and its command's pipes instead. A default soft limit of 1,024 runs out near 170 SSH
nodes; the hard limit is usually far higher, and raising the soft one needs no privilege.
"""

from __future__ import annotations

import resource

from cvs_tasks.errors import InfraError

SSH_NODE_DESCRIPTORS = 6  # socket, follower pipe (2), command pipe (2), log copy
LOCAL_NODE_DESCRIPTORS = 7  # follower stdin/stdout/stderr, command stdin/stdout/stderr, log copy
HARNESS_DESCRIPTORS = 64  # the harness's own: run directory files, history, console, selector

_raised: tuple[int, int] | None = None


def raise_descriptor_limit() -> tuple[int, int]:
    """Soft RLIMIT_NOFILE up to the hard limit, once per process; returns (soft, hard) as they are."""
    global _raised
    if _raised is None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            except (ValueError, OSError):
                pass  # a limit the kernel refuses: keep the one we have, and count with it
        _raised = resource.getrlimit(resource.RLIMIT_NOFILE)
    return _raised


def descriptors_needed(ssh_nodes: int, local_nodes: int) -> int:
    return ssh_nodes * SSH_NODE_DESCRIPTORS + local_nodes * LOCAL_NODE_DESCRIPTORS + HARNESS_DESCRIPTORS


def refusal(ssh_nodes: int, local_nodes: int, soft: int, hard: int) -> str | None:
    """Why these nodes cannot be held with ``soft`` descriptors, or None when they fit (pure)."""
    need = descriptors_needed(ssh_nodes, local_nodes)
    if soft == resource.RLIM_INFINITY or need <= soft:
        return None
    parts = []
    if ssh_nodes:
        parts.append(f"{ssh_nodes} SSH node(s) x {SSH_NODE_DESCRIPTORS}")
    if local_nodes:
        parts.append(f"{local_nodes} local node(s) x {LOCAL_NODE_DESCRIPTORS}")
    hard_text = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    return (f"{ssh_nodes + local_nodes} node(s) need about {need} open files ({' + '.join(parts)} + "
            f"{HARNESS_DESCRIPTORS} for the harness), but this process may open {soft} (hard limit "
            f"{hard_text}): raise the hard limit (`ulimit -Hn`, systemd LimitNOFILE, limits.conf nofile) "
            "or run on fewer nodes")


def ensure_descriptors(ssh_nodes: int, local_nodes: int) -> None:
    """Raise the soft limit, then refuse (InfraError, exit 3) a node count it cannot hold."""
    soft, hard = raise_descriptor_limit()
    problem = refusal(ssh_nodes, local_nodes, soft, hard)
    if problem:
        raise InfraError(problem)
