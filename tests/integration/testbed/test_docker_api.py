"""The testbed's SDK line to its daemons: readiness, the test image, listing by label, inspect,
kill and the wipe that `testbed.down` relies on, against a real node daemon."""
from __future__ import annotations

import uuid

import docker
import pytest

from cvs_tasks.errors import InfraError
from testbed import LATEST_TAG, docker_api

pytestmark = pytest.mark.testbed


def test_ping_tells_a_live_daemon_from_a_socket_nobody_serves(testbed_cluster, tmp_path):
    assert docker_api.ping(testbed_cluster.nodes[0].docker_host)
    assert not docker_api.ping(docker_api.socket_url(tmp_path / "nobody.sock"))
    with pytest.raises(InfraError, match="nobody.sock"):
        docker_api.container_names(docker_api.socket_url(tmp_path / "nobody.sock"))


def test_the_imported_image_carries_the_workdir_and_command_the_harness_expects(testbed_cluster):
    host = testbed_cluster.nodes[0].docker_host
    assert docker_api.has_image(host, LATEST_TAG)
    assert not docker_api.has_image(host, f"cvs-testbed/absent:{uuid.uuid4().hex[:8]}")
    config = docker.DockerClient(base_url=host).images.get(LATEST_TAG).attrs["Config"]
    assert config["WorkingDir"] == "/workspace"
    assert config["Cmd"] == ["sleep", "infinity"]


def test_listing_by_label_inspect_and_kill_see_only_what_they_are_asked_about(testbed_cluster):
    host = testbed_cluster.nodes[1].docker_host
    run_id, tag = f"sdk-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:6]
    api = docker.DockerClient(base_url=host)
    ours = api.containers.run(LATEST_TAG, name=f"sdk-ours-{tag}", detach=True, network_mode="none",
                              labels={"cvs.run_id": run_id})
    other = api.containers.run(LATEST_TAG, name=f"sdk-other-{tag}", detach=True, network_mode="none")
    try:
        assert docker_api.container_names(host, label=f"cvs.run_id={run_id}") == [ours.name]
        assert docker_api.container_names(host, name=other.name) == [other.name]
        assert docker_api.container_names(host, name="sdk-other") == []     # exact names only
        assert docker_api.container_attrs(host, ours.name)["Config"]["Labels"]["cvs.run_id"] == run_id
        assert docker_api.container_attrs(host, f"absent-{tag}") is None
        docker_api.kill(host, ours.name)
        assert docker_api.container_attrs(host, ours.name)["State"]["Status"] == "exited"
    finally:
        for box in (ours, other):
            box.remove(force=True)
    assert docker_api.container_names(host, label=f"cvs.run_id={run_id}") == []


def test_tagging_an_image_the_daemon_lacks_is_an_infra_error_naming_it(testbed_cluster):
    host = testbed_cluster.nodes[0].docker_host
    with pytest.raises(InfraError, match="has no image cvs-testbed/absent:x"):
        docker_api.tag(host, "cvs-testbed/absent:x", "cvs-testbed/absent:y")
