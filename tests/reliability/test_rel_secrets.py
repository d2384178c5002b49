"""A canary HF token and registry password run through the whole lifecycle on the testbed (success,
training failure, image-missing failure with a registry login, --dry-run, --debug output) and
appear nowhere: console, stage logs, run-directory files, reports, JUnit, node logs, any command
line seen by `ps` during the runs, or `docker inspect` of the run's containers."""

from __future__ import annotations

import json
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

from testbed import docker_api
from tests.reliability.helpers import assert_nothing_left, invoke, no_traceback, scenario_for

pytestmark = [pytest.mark.testbed]


class Sampler(threading.Thread):
    """Every 0.1 s: every command line on this machine (all testbed nodes live here) and
    `docker inspect` of the scenario's container on every node; also notes the node token file."""

    def __init__(self, testbed, container: str, scripts_dir: Path):
        super().__init__(daemon=True)
        self.testbed, self.container, self.scripts_dir = testbed, container, scripts_dir
        self.seen: list[str] = []
        self.token_files: set[str] = set()
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.1):
            ps = subprocess.run(["ps", "-eww", "-o", "args="], capture_output=True, text=True, timeout=30)
            self.seen.append(ps.stdout)
            for node in self.testbed.nodes:
                attrs = docker_api.container_attrs(node.docker_host, self.container)
                if attrs is not None:
                    self.seen.append(json.dumps(attrs))
            for token in self.scripts_dir.glob("*/hf_token"):
                try:
                    self.token_files.add(token.read_text())
                except OSError:
                    pass


def files_under(root: Path):
    for path in sorted(root.rglob("*")):
        if path.is_file():
            yield path


def test_canary_secrets_never_leak(testbed_cluster, reports, tmp_path, node_roots):
    token = f"hf_CANARY{uuid.uuid4().hex}"
    password = f"pw_CANARY{uuid.uuid4().hex}"
    (tmp_path / "hf_token").write_text(token + "\n")
    (tmp_path / "registry_password").write_text(password + "\n")
    (tmp_path / "hf_token").chmod(0o600)
    (tmp_path / "registry_password").chmod(0o600)

    def secrets(cfg):
        cfg["paths"]["hf_token_file"] = str(tmp_path / "hf_token")
        cfg["container"]["runtime"]["args"]["registry"] = {
            "username": "cvs-canary", "password_file": str(tmp_path / "registry_password"), "server": "127.0.0.1:9"}

    def faulty(cfg):
        secrets(cfg)
        cfg["container"]["env"]["SIM_FAULT"] = "oom@3"

    def no_image(cfg):
        secrets(cfg)
        cfg["container"]["image"] = "cvs-testbed/sim:canary-missing"

    cluster = testbed_cluster.single_cluster_file
    outputs = []
    scenarios = []
    for edit, args, expected in ((secrets, ["--debug", "all"], {0, 1}), (faulty, ["all"], {1}),
                                 (no_image, ["--debug", "all"], {3}), (secrets, ["all", "--dry-run"], {0})):
        sub = tmp_path / f"s{len(scenarios)}"
        sub.mkdir()
        sc = scenario_for(sub, cluster, node_roots, edit=edit)
        scenarios.append(sc)
        sampler = Sampler(testbed_cluster, sc.container, sc.scripts_dir)
        sampler.start()
        try:
            res = invoke(*args[:-1], args[-1], *sc.flags(), reports=reports) if args[-1] == "--dry-run" \
                else invoke(*args, *sc.flags(), reports=reports)
        finally:
            sampler.halt.set()
            sampler.join(10)
        no_traceback(res)
        assert res.code in expected, res.out[-3000:] + res.err[-3000:]
        outputs += [res.out, res.err, *sampler.seen]
        if edit is secrets and "--dry-run" not in args:
            # the token really went through the lifecycle: it was placed on the node for the job
            assert {t.strip() for t in sampler.token_files} == {token}, sampler.token_files
            training = res.record("training", sc.combos[0])
            assert training["status"] == "PASS", training["reason"]
        if edit is no_image:
            launch = res.record("launch_container")
            assert launch["status"] == "ERROR" and "docker login" in launch["reason"], launch["reason"]
        if "--dry-run" not in args:
            assert_nothing_left(testbed_cluster, sc, res.run_dir.name)
    assert len(outputs) > 40, "the sampler saw too little to mean anything"

    leaks = []
    for secret in (token, password):
        for i, text in enumerate(outputs):
            if secret in text:
                leaks.append(f"{secret[:12]}… in console/ps/inspect sample #{i}")
        for root in [reports, *(sc.node_root for sc in scenarios)]:
            for path in files_under(root):
                if secret.encode() in path.read_bytes():
                    leaks.append(f"{secret[:12]}… in {path}")
    assert leaks == []
    # the redacted config still shows that a registry was configured
    run_json = json.loads((sorted(p for p in reports.iterdir() if p.is_dir() and p.name != "latest")[0]
                           / "run.json").read_text())
    assert "registry" in json.dumps(run_json["effective_config"])
