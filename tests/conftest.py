"""Session fixtures shared by every test folder: only the local testbed cluster.

`testbed_cluster` brings a 2-node testbed up once per session (reusing a running one) and takes
it down at the end unless CVS_TESTBED_KEEP=1. Missing prerequisites fail loudly: CI must never
skip testbed tests silently.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class TestbedNode:
    address: str
    docker_host: str


@dataclass(frozen=True)
class TestbedCluster:
    cluster_file: Path
    single_cluster_file: Path
    known_hosts: Path
    key_file: Path
    nodes: tuple[TestbedNode, ...]
    image: str
    state_dir: Path


@pytest.fixture(scope="session")
def testbed_cluster():
    from testbed import cluster

    problems = cluster.check_prerequisites()
    if problems:
        pytest.fail("testbed prerequisites missing (tests marked `testbed` need them):\n  "
                    + "\n  ".join(problems), pytrace=False)
    state = cluster.state_dir_default()
    running = len(cluster.status(state)["nodes"])
    info = cluster.up(nodes=max(2, running), state_dir=state)
    yield TestbedCluster(cluster_file=info.cluster_file, single_cluster_file=info.single_cluster_file,
                         known_hosts=info.known_hosts, key_file=info.key_file,
                         nodes=tuple(TestbedNode(n.address, n.docker_host) for n in info.nodes),
                         image=info.image, state_dir=info.state_dir)
    if os.environ.get("CVS_TESTBED_KEEP") != "1":
        cluster.down(state)


def pytest_collection_modifyitems(config, items):
    """The `scale` tier (hundreds of nodes, tens of minutes) runs only when a `-m` expression names
    it (`python3 -m pytest -m scale`): not in the whole suite, not in the fast one."""
    if "scale" in (config.getoption("markexpr") or ""):
        return
    slow = [item for item in items if item.get_closest_marker("scale") is not None]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item.get_closest_marker("scale") is None]


def pytest_collection_finish(session):
    """Start the Slurm time-limit step now if its test is selected: Slurm ends it 60-90 s later,
    while the rest of the suite runs (`tests/integration/slurm/time_limit.py`)."""
    if session.config.option.collectonly:
        return
    if any("slurm_time_limit_step" in getattr(item, "fixturenames", ()) for item in session.items):
        from tests.integration.slurm import time_limit

        time_limit.start()


def pytest_sessionfinish(session):
    from tests.integration.slurm import time_limit

    time_limit.stop()
