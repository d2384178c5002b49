"""The descriptor budget: the soft limit goes up to the hard one; a cluster that cannot fit is refused."""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path

import pytest

from cvs_tasks.errors import InfraError
from cvs_tasks.remote import connect, limits


def test_nodes_that_fit_are_not_refused():
    assert limits.refusal(100, 1, 1024, 4096) is None


def test_too_many_nodes_are_refused_with_the_numbers():
    text = limits.refusal(1024, 0, 1024, 1024)
    assert text.startswith("1024 node(s) need about 6208 open files (1024 SSH node(s) x 6 + 64 for the harness)")
    assert "may open 1024 (hard limit 1024)" in text and "ulimit -Hn" in text


def test_the_soft_limit_is_raised_to_the_hard_one(monkeypatch):
    calls = []
    monkeypatch.setattr(limits, "_raised", None)
    monkeypatch.setattr(resource, "getrlimit", lambda _r: (1024, 8192) if not calls else (8192, 8192))
    monkeypatch.setattr(resource, "setrlimit", lambda _r, pair: calls.append(pair))
    assert limits.raise_descriptor_limit() == (8192, 8192) and calls == [(8192, 8192)]
    assert limits.raise_descriptor_limit() == (8192, 8192) and len(calls) == 1  # once per process


@dataclass
class Host:
    name: str
    address: str
    port: int = 22
    local: bool = False


@dataclass
class Cluster:
    hosts: list
    path: Path = Path("/c/cluster.json")
    username: str = "root"
    priv_key_file: str | None = "/k"
    known_hosts: str | None = "kh"


def test_connect_refuses_a_cluster_beyond_the_limit(monkeypatch):
    monkeypatch.setattr(limits, "_raised", (256, 256))
    with pytest.raises(InfraError, match=r"^100 node\(s\) need about 664 open files"):
        connect(Cluster([Host(f"n{i}", f"10.0.0.{i}") for i in range(100)]))
