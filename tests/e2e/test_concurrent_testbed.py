"""Two runs of one docker config on the same testbed node at once (issue #29, item 8).

The config's node paths are per run, but both runs want the container `container.name` names.
The second run must not remove the first run's running container (it did: the launch began with
`docker rm -f <name>`): its launch stops naming the first run, its teardown leaves the container,
and the first run, stopped (SIGSTOP) while the second runs, then finishes and passes.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from testbed import docker_api
from tests.e2e.conftest import REPO
from tests.e2e.test_concurrent_host import Background

pytestmark = [pytest.mark.testbed, pytest.mark.e2e]

CONFIG = REPO / "configs" / "testbed" / "sim_megatron_single.json"


def test_a_second_run_leaves_the_first_runs_container_alone_and_names_it(testbed_cluster, tmp_path):
    cfg = json.loads(CONFIG.read_text())
    name, scripts = cfg["container"]["name"], cfg["paths"]["scripts_dir"]
    node = testbed_cluster.nodes[0]
    before = frozenset(Path(scripts).glob("*/.cvs-run"))
    first = Background(CONFIG, tmp_path / "reports-a", testbed_cluster.single_cluster_file)
    try:
        marker = first.wait_for_file(f"{scripts}/*/.cvs-run", known=before)  # after its container is up
        first_run = json.loads(marker.read_text())["run_id"]
        first.proc.send_signal(signal.SIGSTOP)
        try:
            second = Background(CONFIG, tmp_path / "reports-b", testbed_cluster.single_cluster_file).wait(timeout=300)
            still = docker_api.container_names(node.docker_host)
        finally:
            first.proc.send_signal(signal.SIGCONT)
        assert second.code == 3, second.out[-3000:] + second.err[-3000:]
        assert f"is running for run {first_run} of " in second.out, second.out[-3000:]
        assert second.record("launch_container")["status"] == "ERROR"
        assert second.record("teardown")["status"] == "PASS"
        assert name in still  # neither the launch nor the teardown of the second run removed it
        done = first.wait()
    finally:
        if first.proc.poll() is None:
            first.proc.send_signal(signal.SIGCONT)
            first.proc.kill()
    assert done.code == 0, done.out[-3000:] + done.err[-3000:]
    assert done.results()["verdict"] == "PASS"
    assert docker_api.container_names(node.docker_host) == []
