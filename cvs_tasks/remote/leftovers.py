"""Containers a crashed run left behind, found by their ``cvs.*`` labels (for ``invoke teardown``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from cvs_tasks.remote import docker_cmd as dc
from cvs_tasks.remote.hosts import Hosts
from cvs_tasks.remote.results import Node, NodeResult, failures
from cvs_tasks.remote.retry import Attempt, RetryPolicy


@dataclass(frozen=True)
class Leftover:
    host: str
    rank: int
    name: str
    state: str
    run_id: str
    owner: str


@dataclass(frozen=True)
class LeftoverScan:
    """What was found, plus the nodes that could not be asked (each error names its node)."""

    found: list[Leftover]
    errors: list[str]


def parse_leftovers(node: Node, stdout: str) -> list[Leftover]:
    """Rows of ``docker ps --format LEFTOVER_FORMAT`` (tab-separated) as Leftovers."""
    found = []
    for line in stdout.splitlines():
        fields = line.split("\t")
        if len(fields) < 4 or not fields[0]:
            continue
        found.append(Leftover(node.name, node.rank, fields[0], fields[1], fields[2], fields[3]))
    return found


def find_leftovers(hosts: Hosts, owner: str | None = None, *, run_id: str | None = None,
                   timeout: float = 60.0) -> LeftoverScan:
    """Every container with a ``cvs.run_id`` label on every node (optionally one owner's/run's)."""
    answers = hosts.run(dc.list_labelled_command(run_id=run_id, owner=owner), timeout=timeout)
    found = [item for node, r in zip(hosts.nodes, answers) if r.ok
             for item in parse_leftovers(node, r.stdout)]
    return LeftoverScan(found, failures([r for r in answers if not r.ok]))


def remove_leftovers(hosts: Hosts, leftovers: Sequence[Leftover], *, timeout: float = 60.0,
                     retry: RetryPolicy | None = None,
                     record: list[Attempt] | None = None) -> list[NodeResult]:
    """``docker rm -f`` the given containers, one command per node that has any; absent is fine."""
    by_host: dict[str, list[str]] = {}
    for item in leftovers:
        by_host.setdefault(item.host, []).append(item.name)
    unknown = set(by_host) - set(hosts.names)
    if unknown:
        raise ValueError(f"leftovers name nodes that are not in this cluster: {sorted(unknown)}")
    commands = [dc.remove_command(*by_host[n]) if n in by_host else "true" for n in hosts.names]
    return hosts.run_until_ok(commands, timeout=timeout, step="docker rm (leftovers)",
                              policy=retry or RetryPolicy(attempts=3, first_delay=2.0),
                              record=record if record is not None else [],
                              ok=lambda r: r.ok or (r.exit_code is not None
                                                    and dc.is_missing_container(r.stderr)))
