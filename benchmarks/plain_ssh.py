"""The reference the harness's SSH costs are set against: plain paramiko exec round trips.

One round trip opens a session channel on an open connection, runs a command, reads its output
to the end and its exit status, and closes the channel: the least work any SSH command costs the
head node. Its CPU time in this process (paramiko's reader thread included) is measured in the
same run as the figure it is set against, so a slower or busier machine of this kind pays more for
both alike (docs/measured.md).
"""

from __future__ import annotations

import time
from pathlib import Path

import paramiko

ROUND_TRIPS = 20


def round_trip(transport: paramiko.Transport, command: str, timeout: float) -> int:
    """One exec on ``transport``: its exit status once its output is read to the end."""
    channel = transport.open_session(timeout=timeout)
    try:
        channel.settimeout(timeout)
        channel.exec_command(command)
        while channel.recv(65536):
            pass
        return channel.recv_exit_status()
    finally:
        channel.close()


def exec_round_trip_cpu(address: str, port: int, username: str, key_file: str, known_hosts: Path,
                        command: str = "true", round_trips: int = ROUND_TRIPS, timeout: float = 30.0) -> float:
    """CPU seconds of this process per plain exec round trip on one connection to ``address``
    (host key checked against ``known_hosts``); the connection and a first, untimed round trip
    come before the clock starts."""
    client = paramiko.SSHClient()
    client.load_host_keys(str(known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(address, port=port, username=username, key_filename=key_file, timeout=timeout,
                   allow_agent=False, look_for_keys=False)
    try:
        transport = client.get_transport()
        assert transport is not None
        round_trip(transport, command, timeout)
        start = time.process_time()
        for _ in range(round_trips):
            status = round_trip(transport, command, timeout)
            if status != 0:
                raise RuntimeError(f"`{command}` on {address} exited {status}")
        return (time.process_time() - start) / round_trips
    finally:
        client.close()


def cluster_round_trip_cpu(cluster_path: Path, round_trips: int = ROUND_TRIPS) -> float:
    """``exec_round_trip_cpu`` on the first node of a cluster file, as ``connect`` would reach it."""
    from cvs_tasks.config import load_cluster
    from cvs_tasks.remote.connect import nodes_of
    from cvs_tasks.remote.hostkeys import known_hosts_path

    cluster = load_cluster(cluster_path)
    node = nodes_of(cluster)[0]
    return exec_round_trip_cpu(node.address, node.port, cluster.username, cluster.priv_key_file,
                               known_hosts_path(cluster), round_trips=round_trips)


def reference_or_reason(cluster_path: Path) -> tuple[float | None, str]:
    """``cluster_round_trip_cpu``, or None and why not: a reference that cannot be measured leaves
    its ratio row unmeasured (a MISS that says why) and the other figures standing."""
    try:
        return cluster_round_trip_cpu(cluster_path), ""
    except Exception as exc:  # noqa: BLE001 - reported in the row that needed it
        return None, f"the plain exec reference failed: {type(exc).__name__}: {exc}"
