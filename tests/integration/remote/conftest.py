"""A real sshd on a loopback address, owned by this test session (host key, client key, pid file).

Root login by key only; the daemon is stopped by its pid at the end. Tests that need a
different host key start a second daemon with ``sshd_factory``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from remote_sshd import FakeCluster, FakeHost, Sshd, SshdFactory, keygen


@pytest.fixture(scope="session")
def sshd_factory(tmp_path_factory):
    root = tmp_path_factory.mktemp("sshd")
    client_key = root / "client_ed25519"
    keygen(client_key)
    factory = SshdFactory(root, client_key)
    yield factory
    factory.stop_all()


@pytest.fixture(scope="session")
def sshd(sshd_factory) -> Sshd:
    return sshd_factory.start("main")


@pytest.fixture
def make_cluster(tmp_path):
    def make(servers, known_hosts: Path | None = None, extra_hosts=()) -> FakeCluster:
        hosts = [FakeHost(f"node{i}", s.address, s.port) for i, s in enumerate(servers)]
        hosts += list(extra_hosts)
        key = str(servers[0].client_key) if servers else None
        return FakeCluster(tmp_path / "cluster.json", "root", key, hosts,
                           known_hosts=str(known_hosts) if known_hosts else None)
    return make


@pytest.fixture
def trusted(tmp_path, sshd) -> Path:
    path = tmp_path / "known_hosts"
    path.write_text(sshd.host_key_line())
    return path
