"""Three nodes (24 GPUs): the smoke cell's global batch comes from the cluster (MBS x DP), so the
stand-in launcher, which asserts Megatron's `GBS % (MBS x DP) == 0`, never stops it; a hand-set
smoke batch that cannot fit three nodes is refused at load, before any launch.

A throw-away testbed of its own (127.0.0.130-132, one sshd per node) so the session's 2-node
testbed, which other tests size their batches for, stays as it is. The job runs on the nodes
themselves (runtime `host`), as on a cluster without containers, so one dockerd serves."""

from __future__ import annotations

import re

import pytest

from tests.e2e.conftest import REPO, edited_config, run_invoke

pytestmark = [pytest.mark.testbed, pytest.mark.e2e]

COMBO = "MBS=2,GBS=48,PRECISION=BF16"   # 48 = 2 x DP 24: fits three nodes


@pytest.fixture(scope="module")
def three_nodes(tmp_path_factory):
    from testbed import cluster

    state = tmp_path_factory.mktemp("tb3")
    try:
        yield cluster.up(nodes=3, docker_nodes=1, state_dir=state, first_host=130, log=lambda *_: None)
    finally:
        cluster.down(state, log=lambda *_: None)


def _config(tmp_path, info, smoke_gbs: str):
    shared = tmp_path / "shared"

    def edit(cfg):
        cfg["container"]["runtime"] = {"name": "host", "args": {}}
        cfg["container"]["env"]["MASTER_ADDR"] = info.nodes[0].address
        cfg["train_params"]["megatron_root"] = "{cvs-root}/testbed/trainer/workspace/Megatron-LM"
        cfg["train_params"]["nic_type"] = "ainic"  # no Broadcom library to copy on this machine
        for key, sub in (("log_dir", "logs"), ("scripts_dir", "scripts"), ("data_cache_dir", "cache")):
            cfg["paths"][key] = str(shared / sub)
        cfg["smoke"].update(micro_batch_size="1", global_batch_size=smoke_gbs)
        cfg["sweep"] = {"combinations": {COMBO: {"training_iterations": "8"}}, "runs": [COMBO]}
        cfg["enforce_thresholds"] = False  # record-only: the gates were set for two nodes

    return edited_config(REPO / "configs" / "testbed" / "sim_megatron_distributed.json", tmp_path, edit)


def test_a_three_node_smoke_cell_derives_a_batch_that_fits(three_nodes, reports, tmp_path):
    cfg = _config(tmp_path, three_nodes, smoke_gbs="")
    res = run_invoke("all", "--config", str(cfg), "--cluster", str(three_nodes.cluster_file), reports=reports)
    smoke, training = res.record("smoke"), res.record("training", COMBO)
    assert smoke["status"] == "PASS", res.out + res.err
    assert "MBS=1 GBS=24 BF16" in smoke["reason"]            # one micro batch per data-parallel rank
    assert len(smoke["nodes"]) == 3
    smoke_logs = "".join(p.read_text() for p in (res.run_dir / "logs").rglob("*.log") if "smoke" in str(p))
    assert "AssertionError" not in smoke_logs
    assert re.search(r"global_batch_size \.+ 24\b", smoke_logs) and re.search(r"world_size \.+ 24\b", smoke_logs)
    assert training["status"] == "PASS", res.out + res.err
    assert training["data"]["effective_config"]["world_size"] == 24
    assert training["data"]["config_mismatches"] == []
    assert res.code == 0, res.out + res.err


def test_a_smoke_batch_that_cannot_fit_three_nodes_is_refused_at_load(three_nodes, reports, tmp_path):
    cfg = _config(tmp_path, three_nodes, smoke_gbs="16")
    res = run_invoke("all", "--config", str(cfg), "--cluster", str(three_nodes.cluster_file), reports=reports)
    assert res.code == 2, res.out + res.err
    text = res.out + res.err
    assert "smoke.global_batch_size" in text and "GBS 16 is not a multiple of MBS x DP = 1 x 24 = 24" in text
    assert not any((tmp_path / "shared" / "logs").rglob("*.log"))  # nothing was launched
