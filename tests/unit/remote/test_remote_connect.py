"""connect(): one transport per kind of node, results always in cluster-file order."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fabric.testing.base import MockRemote

from cvs_tasks.remote import CompositeHosts, LocalHosts, Node, SshHosts, connect
from tests.ssh_fakes import FakeChannel, channels


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
    container: dict = field(default_factory=dict)
    known_hosts: str | None = "kh"


@pytest.fixture
def remote():
    mock = MockRemote()
    yield mock
    mock.stop()


def test_all_local_gives_local_hosts():
    hosts = connect(Cluster([Host("localhost", "localhost", local=True)]))
    assert isinstance(hosts, LocalHosts) and hosts.names == ["localhost"]


def test_all_ssh_gives_ssh_hosts_with_the_clusters_known_hosts(remote):
    hosts = connect(Cluster([Host("a", "10.0.0.1", 2222)]), connect_timeout=3)
    assert isinstance(hosts, SshHosts)
    assert hosts.known_hosts == Path("/c/kh") and hosts.nodes == [Node("a", "10.0.0.1", 2222, 0)]


def test_mixed_cluster_keeps_order_and_ranks(remote):
    [channel] = channels(remote, FakeChannel(out=b"ssh\n"))
    cluster = Cluster([Host("here", "localhost", local=True), Host("far", "10.0.0.2"),
                       Host("here2", "127.0.0.1", local=True)])
    with connect(cluster) as hosts:
        assert isinstance(hosts, CompositeHosts)
        results = hosts.run("echo $((1+1))", timeout=10)
        assert [(r.host, r.rank, r.stdout) for r in results] == [
            ("here", 0, "2\n"), ("far", 1, "ssh\n"), ("here2", 2, "2\n")]
        view = hosts.subset([2, 0])
        assert view.names == ["here2", "here"]
        assert [r.stdout for r in view.run(["echo x", "echo y"], timeout=10)] == ["x\n", "y\n"]
    assert channel.command == "echo $((1+1))"


def test_empty_cluster_is_refused():
    with pytest.raises(ValueError, match="no hosts"):
        connect(Cluster([]))


def test_the_cluster_files_fanout_window_reaches_the_ssh_hosts(remote, tmp_path):
    from cvs_tasks.config.cluster import parse_cluster
    from cvs_tasks.config.errors import ConfigError

    raw = {"username": "root", "priv_key_file": "/k", "node_dict": {"10.0.0.1": {}}}
    assert parse_cluster(raw, tmp_path / "c.json").fanout_window == 32
    cluster = parse_cluster(dict(raw, fanout_window=8), tmp_path / "c.json")
    assert connect(cluster).window == 8
    with pytest.raises(ConfigError, match="fanout_window"):
        parse_cluster(dict(raw, fanout_window=0), tmp_path / "c.json")
