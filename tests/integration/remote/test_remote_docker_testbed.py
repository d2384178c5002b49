"""DockerRuntime on the testbed (two loopback sshd nodes, each with its own dockerd).

Every test uses its own container name, run id and owner so it can share the testbed.
"""

from __future__ import annotations

import shlex
import uuid

import pytest

from cvs_tasks.config import load_cluster
from cvs_tasks.remote import RetryPolicy, check_nodes, connect, find_leftovers, remove_leftovers, runtime_for

pytestmark = pytest.mark.testbed


@pytest.fixture
def hosts(testbed_cluster):
    cluster = load_cluster(testbed_cluster.cluster_file)
    with connect(cluster, known_hosts=testbed_cluster.known_hosts, connect_timeout=10) as h:
        yield h


@pytest.fixture
def tag():
    return uuid.uuid4().hex[:8]


# The GPU-less testbed has no GPU or RDMA device, and its dockerd cannot raise the memlock limit
# (as in configs/testbed/*); every other container default goes on the docker run line.
TESTBED_OMITS = ["devices:/dev/kfd", "devices:/dev/dri", "devices:/dev/infiniband", "ulimit:memlock"]


def spec(image: str, name: str, lifetime: str = "per_run") -> dict:
    return {"name": name, "image": image, "lifetime": lifetime,
            "runtime": {"name": "docker", "args": {"network": "host", "privileged": False,
                                                   "omit_defaults": TESTBED_OMITS}},
            "env": {"CVS_PROBE": "probe value"}}


def make(hosts, testbed_cluster, name, tag, lifetime="per_run"):
    return runtime_for(hosts, spec(testbed_cluster.image, name, lifetime), run_id=f"run-{tag}",
                       owner=f"pytest-{tag}", nnodes=len(hosts),
                       retry=RetryPolicy(attempts=2, first_delay=0.5))


def labels(hosts, name):
    fmt = ('{{index .Config.Labels "cvs.run_id"}} {{index .Config.Labels "cvs.owner"}} '
           '{{index .Config.Labels "cvs.name"}}')
    return [r.stdout.split() for r in hosts.run(
        shlex.join(["docker", "inspect", "--format", fmt, name]), timeout=30)]


def test_per_run_launch_labels_exec_and_remove(hosts, testbed_cluster, tag):
    name = f"cvs-rt-{tag}"
    rt = make(hosts, testbed_cluster, name, tag)
    try:
        results = rt.launch()
        assert all(r.ok for r in results), [r.error for r in results]
        assert rt.running() == [True, True]
        assert labels(hosts, name) == [[f"run-{tag}", f"pytest-{tag}", name]] * 2
        out = rt.exec('echo "$NNODES|$CVS_PROBE"', timeout=30)
        assert [r.stdout for r in out] == ["2|probe value\n"] * 2
        ranks = rt.exec(["echo rank0", "echo rank1"], timeout=30)
        assert [r.stdout for r in ranks] == ["rank0\n", "rank1\n"]
        # each node's docker is its own: the containers are distinct
        ids = [r.stdout.strip() for r in hosts.run(f"docker inspect --format '{{{{.Id}}}}' {name}", timeout=30)]
        assert len(set(ids)) == 2
    finally:
        removed = rt.remove()
    assert all(r.ok for r in removed)
    assert rt.running() == [False, False]


def test_persistent_attaches_and_refuses_a_partial_set(hosts, testbed_cluster, tag):
    name = f"cvs-rt-{tag}"
    first = make(hosts, testbed_cluster, name, tag, "persistent")
    try:
        assert all(r.ok for r in first.launch()) and first.mode == "launched"
        second = make(hosts, testbed_cluster, name, tag, "persistent")
        assert all(r.ok for r in second.launch()) and second.mode == "attached"
        hosts.subset([1]).run(f"docker rm -f {name}", timeout=30)
        third = make(hosts, testbed_cluster, name, tag, "persistent")
        refused = third.launch()
        assert not any(r.ok for r in refused)
        assert "refusing to relaunch" in refused[0].error
        assert f"running on: {hosts.nodes[0].label}; not on: {hosts.nodes[1].label}" in refused[0].error
        assert third.running() == [True, False]  # nothing was started or removed
    finally:
        assert all(r.ok for r in first.remove(force=True))


def test_leftovers_are_found_by_label_and_removed(hosts, testbed_cluster, tag):
    name = f"cvs-rt-{tag}"
    rt = make(hosts, testbed_cluster, name, tag)
    assert all(r.ok for r in rt.launch())
    scan = find_leftovers(hosts, owner=f"pytest-{tag}")
    assert scan.errors == []
    assert sorted((x.host, x.name, x.run_id) for x in scan.found) == sorted(
        (n, name, f"run-{tag}") for n in hosts.names)
    assert all(r.ok for r in remove_leftovers(hosts, scan.found))
    assert find_leftovers(hosts, owner=f"pytest-{tag}").found == []


def test_cluster_check_passes_on_the_testbed(hosts, testbed_cluster):
    checks = check_nodes(hosts, "docker", testbed_cluster.image, "/tmp", "true", min_free_gib=0.1)
    assert all(c.ok for c in checks), [(c.host, c.items) for c in checks]
