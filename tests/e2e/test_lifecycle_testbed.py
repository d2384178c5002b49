"""`invoke all` on the local testbed: real sshd per node, real dockerd per node, real containers,
real multi-node TCP rendezvous; only the GPUs and the training math are simulated."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from testbed import docker_api
from tests.e2e.conftest import REPO, edited_config, impossible_gate, run_invoke

pytestmark = [pytest.mark.testbed, pytest.mark.e2e]

CONFIGS = REPO / "configs" / "testbed"


def containers_on(node) -> list[str]:
    return docker_api.container_names(node.docker_host)


def trainer_processes() -> list[str]:
    """Simulated-trainer processes living in a container's root filesystem (a host-runtime run of
    another test on this machine is not a leak of this one)."""
    ours = os.stat("/")
    out = subprocess.run(["pgrep", "-af", "simtrainer"], capture_output=True, text=True, timeout=30)
    leaked = []
    for line in out.stdout.splitlines():
        pid = line.split()[0]
        try:
            root = os.stat(f"/proc/{pid}/root/")
        except OSError:
            continue  # already gone
        if (root.st_dev, root.st_ino) != (ours.st_dev, ours.st_ino):
            leaked.append(line)
    return leaked


@pytest.fixture
def clean_nodes(testbed_cluster):
    """After the test: no container, no simulated-trainer process, no per-run node folder left."""
    yield testbed_cluster
    for node in testbed_cluster.nodes:
        assert containers_on(node) == [], f"containers left on {node.address}"
    assert trainer_processes() == []


def scripts_left(config: Path, run_id: str) -> bool:
    scripts_dir = json.loads(config.read_text())["paths"]["scripts_dir"]
    return (Path(scripts_dir) / run_id).exists()


@pytest.mark.parametrize(
    "config, cluster_attr",
    [
        ("sim_megatron_single.json", "single_cluster_file"),
        ("sim_megatron_distributed.json", "cluster_file"),
        ("sim_primus_single.json", "single_cluster_file"),
        ("sim_primus_distributed.json", "cluster_file"),
    ],
)
def test_all_passes_on_the_testbed(config, cluster_attr, clean_nodes, reports):
    cfg = CONFIGS / config
    res = run_invoke("all", "--config", str(cfg), "--cluster", str(getattr(clean_nodes, cluster_attr)), reports=reports)
    assert res.code == 0, res.out + res.err
    results = res.results()
    assert results["verdict"] == "PASS"
    assert res.record("launch_container")["status"] == "PASS"
    assert res.record("teardown")["status"] == "PASS"
    combos = json.loads(cfg.read_text())["sweep"]["runs"]
    for combo in combos:
        training = res.record("training", combo)
        assert training["status"] == "PASS"
        assert training["data"]["completed"] is True
        assert res.record("metric", combo)["status"] == "PASS"
        assert res.record("loss_curve", combo)["status"] == "PASS"
        assert len(training["nodes"]) == (2 if "distributed" in config else 1)
        effective = training["data"]["effective_config"]  # what the trainer said it ran, read back
        assert effective["world_size"] == 8 * len(training["nodes"]) and training["data"]["config_mismatches"] == []
    if "distributed" in config:
        eff = res.record("training", combos[0])["data"]["scaling_efficiency_pct"]
        assert eff is not None and 80 < eff < 120
    if "primus" in config:
        ckpt = res.record("checkpoint")
        assert ckpt["status"] == "PASS", ckpt["reason"]
        assert ckpt["data"]["first_resumed_step"] == ckpt["data"]["last_ckpt"] + 1
    assert not scripts_left(cfg, res.run_dir.name)


def test_a_gate_set_too_high_fails_on_the_testbed(testbed_cluster, clean_nodes, reports, tmp_path):
    edit = impossible_gate(tmp_path, "training.tokens_per_gpu", {"kind": "min_tok_s", "value": 1e9})
    cfg = edited_config(CONFIGS / "sim_megatron_single.json", tmp_path, edit)
    res = run_invoke("all", "--config", str(cfg), "--cluster", str(testbed_cluster.single_cluster_file),
                     reports=reports)
    assert res.code == 1, res.out + res.err
    combo = json.loads(cfg.read_text())["sweep"]["runs"][0]
    metric = res.record("metric", combo)
    assert metric["status"] == "FAIL" and "training.tokens_per_gpu" in metric["reason"]


def test_a_fault_on_two_nodes_fails_its_combo_and_the_other_still_runs(testbed_cluster, clean_nodes, reports, tmp_path):
    src = CONFIGS / "sim_megatron_distributed.json"
    runs = json.loads(src.read_text())["sweep"]["runs"]
    smoke_precision = json.loads(src.read_text())["smoke"]["precision"]
    faulty = next(c for c in runs if not c.endswith(smoke_precision))
    healthy = next(c for c in runs if c != faulty)

    def edit(cfg):
        cfg["container"]["env"].update(SIM_FAULT="gpu_fault@4", SIM_FAULT_PRECISION=faulty.split("PRECISION=")[1])

    cfg = edited_config(src, tmp_path, edit)
    res = run_invoke("all", "--config", str(cfg), "--cluster", str(testbed_cluster.cluster_file), reports=reports)
    assert res.code == 1, res.out + res.err
    bad = res.record("training", faulty)
    assert bad["status"] == "FAIL"
    assert bad["data"]["error"]["cls"] == "gpu_fault"
    assert bad["data"]["error"]["host"] in {n.address for n in testbed_cluster.nodes}
    assert res.record("metric", faulty)["status"] == "SKIPPED"
    assert res.record("training", healthy)["status"] == "PASS"
    assert res.record("teardown")["status"] == "PASS"
