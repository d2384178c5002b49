"""A whole lifecycle on light SSH nodes (issue #25): N loopback nodes behind one sshd
(`testbed/light.py`), the host runtime, the simulated trainer's TCP rendezvous across all N.

The small version (16 nodes, about a minute) is in the testbed tier like every e2e test; the
256-node run is the `scale` tier, left out unless asked for (`python3 -m pytest -m scale`). The
light testbed's own writer is left idle here (a very low rate): the trainer writes the logs.
"""

from __future__ import annotations

import pytest

from tests.e2e.conftest import REPO, edited_config, run_invoke

COMBO_MBS = 2
PORT = 2324  # neither the light testbed's default nor the benchmark's


@pytest.fixture
def light_nodes(request, tmp_path_factory):
    from testbed import light

    state = tmp_path_factory.mktemp("light")
    try:
        yield light.up(nodes=request.param, state_dir=state, port=PORT, rate=0.001, log=lambda *_: None)
    finally:
        light.down(state, log=lambda *_: None)


def _config(tmp_path, info):
    shared = tmp_path / "shared"
    dp = info.nodes * 8
    combo = f"MBS={COMBO_MBS},GBS={COMBO_MBS * dp},PRECISION=BF16"

    def edit(cfg):
        cfg["container"]["runtime"] = {"name": "host", "args": {}}
        cfg["container"]["env"]["MASTER_ADDR"] = info.addresses[0]
        cfg["container"]["env"]["SIM_NODE_FAULTS"] = str(shared / "node-faults")
        cfg["container"]["env"]["SIM_NODE_SYS"] = str(shared / "node-sys")
        cfg["container"]["env"]["SIM_NCCL_TIMEOUT_S"] = "120"  # hundreds of processes start on 2 cores
        cfg["train_params"]["megatron_root"] = "{cvs-root}/testbed/trainer/workspace/Megatron-LM"
        cfg["train_params"]["nic_type"] = "ainic"  # no Broadcom library to copy on this machine
        for key, sub in (("log_dir", "logs/{run-id}"), ("scripts_dir", "scripts"), ("data_cache_dir", "cache")):
            cfg["paths"][key] = str(shared / sub)
        cfg["smoke"].update(micro_batch_size="1", global_batch_size="")
        cfg["sweep"] = {"combinations": {combo: {"training_iterations": "8"}}, "runs": [combo]}
        cfg["enforce_thresholds"] = False  # record-only: the gates were set for two nodes
        cfg["watch"].update(poll_interval_s=2.0, stall_timeout_s=300, startup_timeout_s=600)  # N followers

    return edited_config(REPO / "configs" / "testbed" / "sim_megatron_distributed.json", tmp_path, edit), combo


def _run_lifecycle(info, tmp_path, reports, timeout):
    cfg, combo = _config(tmp_path, info)
    res = run_invoke("all", "--config", str(cfg), "--cluster", info.cluster_file, reports=reports, timeout=timeout)
    text = res.out + res.err
    training = res.record("training", combo)
    assert training["status"] == "PASS", text[-4000:]
    assert len(training["nodes"]) == info.nodes
    assert training["data"]["effective_config"]["world_size"] == 8 * info.nodes
    assert res.code == 0, text[-4000:]
    assert (res.run_dir / "report.html").is_file()
    passing = (res.run_dir / "passing_nodes.txt").read_text().split()
    assert sorted(passing) == sorted(info.addresses)
    return res


@pytest.mark.parametrize("light_nodes", [16], indirect=True)
def test_a_whole_lifecycle_on_16_light_ssh_nodes_passes(light_nodes, tmp_path, reports):
    _run_lifecycle(light_nodes, tmp_path, reports, timeout=600)


@pytest.mark.scale
@pytest.mark.parametrize("light_nodes", [256], indirect=True)
def test_a_whole_lifecycle_on_256_light_ssh_nodes_passes(light_nodes, tmp_path, reports):
    _run_lifecycle(light_nodes, tmp_path, reports, timeout=3600)
