"""Faults that stop a run before training: unreachable node, SSH auth refused, unknown and changed
host key, dockerd down on one node, image missing, container exiting right after start.

Each must end in exit 3 with the launch stage's reason naming the node and the cause, every later
stage skipped, a complete report, and no container left on the healthy node (launch rolls back).
The broken nodes are extra addresses or files of this test's own; the shared daemons are not touched.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from testbed import daemons, procs
from tests.reliability.helpers import (
    assert_nothing_left,
    assert_run_dir_readable,
    detection_bound,
    invoke,
    no_traceback,
    note_detection,
    scenario_for,
)

pytestmark = [pytest.mark.testbed]

UNREACHABLE = "127.0.0.250"  # nothing listens here
NO_DOCKER = "127.0.0.171"  # this test's own sshd, whose sessions point at a dead docker socket


def write_cluster(tmp_path: Path, testbed, addresses: list[str], *, key: Path | None = None,
                  known_hosts: Path | None = None, name: str = "cluster.json") -> Path:
    data = {"username": "root", "priv_key_file": str(key or testbed.key_file),
            "known_hosts": str(known_hosts or testbed.known_hosts),
            "node_dict": {a: {} for a in addresses}}
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def new_key(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, timeout=30)
    return path


def run_until_launch_fails(sc, reports, testbed, expect_in_reason: list[str], bad_node: str) -> tuple:
    res = invoke("all", *sc.flags(), reports=reports, timeout=240)
    assert res.code == 3, res.out + res.err
    no_traceback(res)
    launch = res.record("launch_container")
    assert launch["status"] == "ERROR"
    for words in expect_in_reason:
        assert words.lower() in launch["reason"].lower(), launch["reason"]
    assert bad_node in launch["reason"], launch["reason"]
    for combo in sc.combos:
        assert res.record("training", combo)["status"] == "SKIPPED"
    results = assert_run_dir_readable(res.run_dir)
    assert results["verdict"] != "PASS"
    assert_nothing_left(testbed, sc, res.run_dir.name)
    return res, launch


def test_node_unreachable_at_start(testbed_cluster, reports, tmp_path, node_roots):
    cluster = write_cluster(tmp_path, testbed_cluster, [testbed_cluster.nodes[0].address, UNREACHABLE])
    sc = scenario_for(tmp_path, cluster, node_roots, base="sim_megatron_distributed.json")
    res, launch = run_until_launch_fails(sc, reports, testbed_cluster, ["connection refused"], UNREACHABLE)
    teardown = res.record("teardown")
    assert teardown["status"] == "ERROR" and UNREACHABLE in teardown["reason"], teardown["reason"]
    assert len([a for a in launch["attempts"] if a["step"] == "docker rm"]) == 3, launch["attempts"]
    # back-off: docker rm retried after 2 s and 4 s, each round's SSH connect retried after 1 s
    note_detection("node_unreachable", launch["ended"] - launch["started"], detection_bound(2 + 4 + 3 * 1, 4),
                   "launch start")


def test_ssh_auth_refused(testbed_cluster, reports, tmp_path, node_roots):
    cluster = write_cluster(tmp_path, testbed_cluster, [testbed_cluster.nodes[0].address],
                            key=new_key(tmp_path / "stranger"))
    sc = scenario_for(tmp_path, cluster, node_roots)
    res, launch = run_until_launch_fails(sc, reports, testbed_cluster, ["authentication failed", "priv_key_file"],
                                         testbed_cluster.nodes[0].address)
    note_detection("ssh_auth_refused", launch["ended"] - launch["started"], 10, "launch start")


def test_unknown_host_key(testbed_cluster, reports, tmp_path, node_roots):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    cluster = write_cluster(tmp_path, testbed_cluster, [testbed_cluster.nodes[0].address], known_hosts=empty)
    sc = scenario_for(tmp_path, cluster, node_roots)
    res, launch = run_until_launch_fails(sc, reports, testbed_cluster, ["cluster.trust"],
                                         testbed_cluster.nodes[0].address)
    assert "unknown" in launch["reason"].lower() or "not in" in launch["reason"].lower(), launch["reason"]
    assert empty.read_text() == "", "an unknown host key must never be recorded silently"
    note_detection("unknown_host_key", launch["ended"] - launch["started"], 10, "launch start")


def test_changed_host_key(testbed_cluster, reports, tmp_path, node_roots):
    other = new_key(tmp_path / "impostor")
    address = testbed_cluster.nodes[0].address
    known = tmp_path / "known_hosts"
    known.write_text(f"{address} {' '.join(Path(str(other) + '.pub').read_text().split()[:2])}\n")
    cluster = write_cluster(tmp_path, testbed_cluster, [address], known_hosts=known)
    sc = scenario_for(tmp_path, cluster, node_roots)
    res, launch = run_until_launch_fails(sc, reports, testbed_cluster, ["changed"], address)
    note_detection("changed_host_key", launch["ended"] - launch["started"], 10, "launch start")


@pytest.fixture
def node_without_docker(testbed_cluster, tmp_path):
    """An extra sshd (this test's own) whose sessions' DOCKER_HOST is a socket nobody serves."""
    paths = daemons.NodePaths(tmp_path / "nodocker", tmp_path / "nodocker-run")
    key = " ".join(daemons.host_key(paths).split()[:2])
    pid = daemons.start_sshd(NO_DOCKER, paths, testbed_cluster.state_dir / "client" / "authorized_keys",
                             f"unix://{tmp_path}/nodocker-run/docker.sock")
    try:
        known = tmp_path / "known_hosts_nodocker"
        known.write_text(testbed_cluster.known_hosts.read_text() + f"{NO_DOCKER} {key}\n")
        yield known
    finally:
        procs.stop(pid, str(paths.sshd_config))


def test_dockerd_down_on_one_node(testbed_cluster, node_without_docker, reports, tmp_path, node_roots):
    cluster = write_cluster(tmp_path, testbed_cluster, [testbed_cluster.nodes[0].address, NO_DOCKER],
                            known_hosts=node_without_docker)
    sc = scenario_for(tmp_path, cluster, node_roots, base="sim_megatron_distributed.json")
    res, launch = run_until_launch_fails(sc, reports, testbed_cluster, ["docker"], NO_DOCKER)
    assert "cannot connect to the docker daemon" in launch["reason"].lower(), launch["reason"]
    # back-off: docker rm on the node without docker retried after 2 s and 4 s; the other node rolled back
    note_detection("dockerd_down", launch["ended"] - launch["started"], detection_bound(2 + 4, 5), "launch start")


def test_image_missing(testbed_cluster, reports, tmp_path, node_roots):
    def edit(cfg):
        cfg["container"]["image"] = "cvs-testbed/sim:no-such-tag"

    sc = scenario_for(tmp_path, testbed_cluster.single_cluster_file, node_roots, edit=edit)
    res, launch = run_until_launch_fails(sc, reports, testbed_cluster, ["docker pull", "cvs-testbed/sim:no-such-tag"],
                                         testbed_cluster.nodes[0].address)
    pulls = [a for a in launch["attempts"] if a["step"] == "docker pull"]
    assert len(pulls) == 3, launch["attempts"]  # retried with backoff, each attempt recorded
    note_detection("image_missing", launch["ended"] - launch["started"], 60, "launch start (3 pull attempts)")


def test_container_exits_right_after_start(testbed_cluster, reports, tmp_path, node_roots):
    """`sleep infinity` (the container's command) is shadowed by a script that exits at once."""
    crash = tmp_path / "crash-sleep"
    crash.write_text("#!/bin/sh\necho 'simulated: container entrypoint crashed' >&2\nexit 3\n")
    crash.chmod(0o755)

    def edit(cfg):
        cfg["container"]["runtime"]["args"]["volumes"].append(f"{crash}:/usr/local/bin/sleep:ro")

    sc = scenario_for(tmp_path, testbed_cluster.single_cluster_file, node_roots, edit=edit)
    res, launch = run_until_launch_fails(sc, reports, testbed_cluster, ["exited", "docker logs"],
                                         testbed_cluster.nodes[0].address)
    note_detection("container_exits_at_start", launch["ended"] - launch["started"], 15, "launch start")
