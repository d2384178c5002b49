"""What ran is what was asked, on the testbed: the stand-in launchers keep the real scripts' contracts
(DeepSeek reads SEQ_LEN, pins one node), the harness reads back each trainer's arguments dump and
fails a combo whose trainer does not run what was asked, and refuses what a script cannot do."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import REPO, edited_config, run_invoke
from tests.e2e.test_lifecycle_testbed import containers_on

pytestmark = [pytest.mark.testbed, pytest.mark.e2e]

CONFIGS = REPO / "configs" / "testbed"
DEEPSEEK = {"model_name": "deepseek_v2_lite", "tokenizer_model": "deepseek-ai/DeepSeek-V2-Lite", "model_size": "16",
            "sequence_length": "4096"}


def _one_combo(cfg: dict) -> str:
    first = cfg["sweep"]["runs"][0]
    cfg["sweep"]["runs"] = [first]
    cfg["enforce_thresholds"] = False  # record-only: the gates were calibrated for Llama 3.1 8B
    return first


def test_deepseek_single_node_runs_with_the_names_its_script_reads(testbed_cluster, reports, tmp_path):
    def edit(cfg):
        cfg["train_params"].update(DEEPSEEK)
        _one_combo(cfg)

    cfg = edited_config(CONFIGS / "sim_megatron_single.json", tmp_path, edit)
    combo = json.loads(cfg.read_text())["sweep"]["runs"][0]
    res = run_invoke("all", "--config", str(cfg), "--cluster", str(testbed_cluster.single_cluster_file),
                     reports=reports)
    training = res.record("training", combo)
    assert training["status"] == "PASS", res.out + res.err
    effective = training["data"]["effective_config"]
    assert (effective["seq_length"], effective["world_size"], effective["recompute"]) == (4096, 8, "none")
    assert effective["exit_interval"] == 50 and training["data"]["config_mismatches"] == []
    assert res.record("download_tokenizer")["status"] == "SKIPPED"  # the script loads it from the hub
    assert "Trainer ran" in (res.run_dir / "report.html").read_text()


def test_a_launcher_that_ignores_seq_length_fails_the_combo_naming_it(testbed_cluster, reports, tmp_path):
    """train_deepseekv2.sh reads SEQ_LEN, GBS, TRAIN_ITERS: given the Llama names it trains its defaults."""
    def edit(cfg):
        cfg["train_params"].update(sequence_length="4096", training_script="examples/deepseek_v2/train_deepseekv2.sh")
        cfg["smoke"]["enabled"] = False
        _one_combo(cfg)

    cfg = edited_config(CONFIGS / "sim_megatron_single.json", tmp_path, edit)
    combo = json.loads(cfg.read_text())["sweep"]["runs"][0]
    res = run_invoke("all", "--config", str(cfg), "--cluster", str(testbed_cluster.single_cluster_file),
                     reports=reports)
    assert res.code == 1, res.out + res.err
    training = res.record("training", combo)
    assert training["status"] == "FAIL"
    assert "seq_length 2048 != 4096 (asked): train_deepseekv2.sh did not pass the sequence length" in training["reason"]
    params = {m["param"] for m in training["data"]["config_mismatches"]}
    assert {"seq_length", "global_batch_size", "train_iters"} <= params
    assert res.record("metric", combo)["status"] == "SKIPPED"


def test_a_distributed_deepseek_config_is_refused_with_the_reason(testbed_cluster, reports, tmp_path):
    def edit(cfg):
        cfg["train_params"].update(DEEPSEEK)

    cfg = edited_config(CONFIGS / "sim_megatron_distributed.json", tmp_path, edit)
    before = [containers_on(node) for node in testbed_cluster.nodes]
    res = run_invoke("all", "--config", str(cfg), "--cluster", str(testbed_cluster.cluster_file), reports=reports)
    assert res.code == 2, res.out + res.err
    assert "train_params.tokenizer_model: train_deepseekv2.sh" in res.out + res.err
    assert "pins NNODES=1" in res.out + res.err
    assert [containers_on(node) for node in testbed_cluster.nodes] == before  # refused before any launch


def test_primus_405b_resumes_from_the_folder_its_yaml_pins(testbed_cluster, reports, tmp_path):
    """The 405B experiment YAML pins `exp_name`, so Primus saves under
    `<checkpoint dir>/exp-llama3_405B-pretrain/checkpoints`; the harness reads the YAML's header
    and checks and loads from there (looking in `<checkpoint dir>/checkpoints` finds nothing)."""
    def edit(cfg):
        cfg["train_params"].update(model_name="llama3.1_405B", tokenizer_model="meta-llama/Llama-3.1-405B",
                                   model_size="405")
        cfg["smoke"]["enabled"] = False
        _one_combo(cfg)

    cfg = edited_config(CONFIGS / "sim_primus_single.json", tmp_path, edit)
    res = run_invoke("all", "--config", str(cfg), "--cluster", str(testbed_cluster.single_cluster_file),
                     reports=reports)
    ckpt = res.record("checkpoint")
    assert ckpt["status"] == "PASS", res.out + res.err
    assert ckpt["data"]["first_resumed_step"] == ckpt["data"]["last_ckpt"] + 1
    resume_log = (res.run_dir / ckpt["artifacts"]["resume node 0 log"]).read_text()
    assert "/ckpt_primus/exp-llama3_405B-pretrain/checkpoints at iteration 10" in resume_log
    assert res.code == 0, res.out + res.err


def test_primus_v05_overrides_reach_the_trainer_typed_and_the_run_passes(testbed_cluster, reports, tmp_path):
    """Under the override parser of Primus v0.5.0 (rocm/primus:v25.10), where `false` and `null` stay
    strings, the harness's `--use_torch_fsdp2 False --recompute_granularity None` read back as off."""
    def edit(cfg):
        cfg["container"]["env"]["SIM_PRIMUS_VERSION"] = "v0.5.0"
        cfg["checkpoint"]["enforce"] = False
        _one_combo(cfg)

    cfg = edited_config(CONFIGS / "sim_primus_single.json", tmp_path, edit)
    combo = json.loads(cfg.read_text())["sweep"]["runs"][0]
    res = run_invoke("all", "--config", str(cfg), "--cluster", str(testbed_cluster.single_cluster_file),
                     reports=reports)
    assert res.code == 0, res.out + res.err
    assert res.record("smoke")["status"] == "PASS"
    training = res.record("training", combo)
    assert training["status"] == "PASS" and training["data"]["config_mismatches"] == []
    effective = training["data"]["effective_config"]
    assert (effective["recompute"], effective["fsdp"], effective.get("strings", {})) == ("none", False, {})
