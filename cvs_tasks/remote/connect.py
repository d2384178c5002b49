"""``connect(cluster)``: the right transport per node (local or SSH), in cluster-file order."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from cvs_tasks.remote.hostkeys import known_hosts_path
from cvs_tasks.remote.hosts import CompositeHosts, Hosts
from cvs_tasks.remote.limits import ensure_descriptors
from cvs_tasks.remote.local import LocalHosts
from cvs_tasks.remote.results import Node
from cvs_tasks.remote.retry import RetryPolicy
from cvs_tasks.remote.ssh import FANOUT_WINDOW, SshHosts

if TYPE_CHECKING:
    from cvs_tasks.config import Cluster


def nodes_of(cluster: "Cluster") -> list[Node]:
    """The cluster's hosts as Nodes; rank = position in the file (NODE_RANK of that host)."""
    return [Node(h.name, h.address, int(getattr(h, "port", 22) or 22), rank)
            for rank, h in enumerate(cluster.hosts)]


def connect(cluster: "Cluster", *, known_hosts: str | os.PathLike | None = None,
            connect_timeout: float = 10.0, keepalive: int = 30,
            retry: RetryPolicy | None = None) -> Hosts:
    """Hosts for every node of ``cluster``; connections open lazily, on the first command.

    Local nodes (``{"local": true}``) run through subprocesses, the rest over SSH as
    ``cluster.username`` with ``cluster.priv_key_file``; a mix gives a composite. The soft
    descriptor limit is raised to the hard one first, and a cluster that cannot fit in it is
    refused (InfraError) with the numbers.
    """
    nodes = nodes_of(cluster)
    if not nodes:
        raise ValueError("the cluster has no hosts")
    local = [i for i, h in enumerate(cluster.hosts) if getattr(h, "local", False)]
    remote = [i for i in range(len(nodes)) if i not in local]
    ensure_descriptors(len(remote), len(local))  # before any connection: refuse what cannot fit
    parts: list[tuple[Hosts, list[int]]] = []
    if local:
        parts.append((LocalHosts([nodes[i] for i in local]), local))
    if remote:
        ssh = SshHosts([nodes[i] for i in remote], username=cluster.username,
                       key_file=cluster.priv_key_file,
                       known_hosts=known_hosts_path(cluster, known_hosts),
                       connect_timeout=connect_timeout, keepalive=keepalive, retry=retry,
                       cluster_file=getattr(cluster, "path", None),
                       window=int(getattr(cluster, "fanout_window", None) or FANOUT_WINDOW))
        parts.append((ssh, remote))
    if len(parts) == 1:
        return parts[0][0]
    return CompositeHosts(parts, nodes)
