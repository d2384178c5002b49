"""Load-time checks: what a multi-node run needs, and an HF token for a gated tokenizer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from config_helpers import minimal_config

from cvs_tasks.config import ConfigError, load_suite, parse_cluster
from cvs_tasks.config.readiness import distributed_problems, gated_tokenizer_problems, is_gated
from cvs_tasks.plan import check_plan_ready, make_plan
from tests.filled_templates import filled

HOSTS = [("10.0.0.1", "10.0.0.1"), ("10.0.0.2", "10.0.0.2")]
GOOD_ENV = {"MASTER_ADDR": "10.0.0.1", "NCCL_SOCKET_IFNAME": "enp193s0f1np1", "GLOO_SOCKET_IFNAME": "enp193s0f1np1",
            "NCCL_IB_HCA": "bnxt_re0,bnxt_re1"}


def paths(problems):
    return {where: message for where, message in problems}


def test_a_complete_multi_node_env_passes():
    assert distributed_problems(GOOD_ENV, HOSTS, "c.json") == []


def test_every_missing_setting_is_reported_at_once():
    found = paths(distributed_problems({}, HOSTS, "c.json"))
    assert set(found) == {"container.env.NCCL_SOCKET_IFNAME", "container.env.GLOO_SOCKET_IFNAME",
                          "container.env.NCCL_IB_HCA", "container.env.MASTER_ADDR"}
    assert "10.0.0.1, the first host in c.json" in found["container.env.MASTER_ADDR"]
    assert "NCCL_IB_DISABLE" in found["container.env.NCCL_IB_HCA"]


def test_a_fabric_without_rdma_says_so_instead_of_naming_hcas():
    env = {k: v for k, v in GOOD_ENV.items() if k != "NCCL_IB_HCA"}
    assert distributed_problems({**env, "NCCL_IB_DISABLE": "1"}, HOSTS, "c.json") == []


@pytest.mark.parametrize("addr, words", [
    ("10.0.0.9", "10.0.0.9 is not one of the hosts in c.json (10.0.0.1, 10.0.0.2)"),
    ("127.0.0.1", "is not one of the hosts"),
    ("localhost", "is not one of the hosts"),
    ("10.0.0.2", "is host 1 in c.json, but rank 0 (which serves the rendezvous) runs on the first host 10.0.0.1"),
])
def test_master_addr_must_be_the_first_host(addr, words):
    found = paths(distributed_problems({**GOOD_ENV, "MASTER_ADDR": addr}, HOSTS, "c.json"))
    assert list(found) == ["container.env.MASTER_ADDR"] and words in found["container.env.MASTER_ADDR"]


def test_master_addr_by_host_name_and_undecidable_names():
    named = [("gpu01", "gpu01.cluster"), ("gpu02", "gpu02.cluster")]
    assert distributed_problems({**GOOD_ENV, "MASTER_ADDR": "gpu01"}, named) == []
    assert distributed_problems({**GOOD_ENV, "MASTER_ADDR": "10.1.1.1"}, named) == []  # DNS could say: not checked


def test_slurm_sets_master_addr_itself_and_no_cluster_means_no_membership_check():
    assert distributed_problems({**GOOD_ENV, "MASTER_ADDR": ""}, None, scheduled=True) == []
    assert distributed_problems({**GOOD_ENV, "MASTER_ADDR": "10.9.9.9"}, None) == []


@pytest.mark.parametrize("repo, gated", [("meta-llama/Llama-3.1-8B", True), ("Meta-Llama/Llama-3.3-70B", True),
                                         ("google/gemma-2-9b", True), ("deepseek-ai/DeepSeek-V2-Lite", False),
                                         ("/models/meta-llama/Llama-3.1-8B", False), ("", False)])
def test_gated_repos(repo, gated):
    assert is_gated(repo) is gated


def test_a_gated_tokenizer_needs_a_token_file_with_a_token():
    tok = {"train_params.tokenizer_model": "meta-llama/Llama-3.1-8B"}
    assert gated_tokenizer_problems(tok, "/t", 1) == []
    for file, lines, words in (("", None, "empty"), ("/t", None, "/t does not exist on this machine"),
                               ("/t", 0, "holds no token")):
        [(where, message)] = gated_tokenizer_problems(tok, file, lines)
        assert where == "paths.hf_token_file" and words in message
        assert "meta-llama/Llama-3.1-8B (train_params.tokenizer_model) is a gated Hugging Face repo" in message
    assert gated_tokenizer_problems({"train_params.tokenizer_model": "deepseek-ai/DeepSeek-V2-Lite"}, "", None) == []


def test_a_run_plan_is_refused_with_every_problem_naming_the_config(suite_files, tmp_path):
    config = minimal_config(paths={**minimal_config()["paths"], "hf_token_file": str(tmp_path / "absent")})
    config["sweep"]["combinations"]["MBS=4,GBS=128,PRECISION=FP8"]["tokenizer_model"] = "meta-llama/Llama-3.3-70B"
    config["container"]["env"].update(MASTER_ADDR="10.0.0.2")
    path = suite_files(config, name="suite_distributed.json")
    cluster = parse_cluster({"username": "u", "priv_key_file": "/k", "node_dict": ["10.0.0.1", "10.0.0.2"]},
                            tmp_path / "c.json")
    with pytest.raises(ConfigError) as info:
        check_plan_ready(make_plan(load_suite(path, cluster), cluster))
    found = paths(info.value.problems)
    assert info.value.file == path and info.value.exit_code == 2
    assert set(found) == {"container.env.NCCL_SOCKET_IFNAME", "container.env.GLOO_SOCKET_IFNAME",
                          "container.env.NCCL_IB_HCA", "container.env.MASTER_ADDR", "paths.hf_token_file"}
    assert 'sweep.combinations["MBS=4,GBS=128,PRECISION=FP8"].tokenizer_model' in found["paths.hf_token_file"]
    token = tmp_path / "tok"
    token.write_text("# comment\nhf_x\n")
    config["paths"]["hf_token_file"] = str(token)
    config["container"]["env"].update({**GOOD_ENV, "NCCL_IB_HCA": "bnxt_re0"})
    path = suite_files(config, name="suite_distributed.json")
    check_plan_ready(make_plan(load_suite(path, cluster), cluster))  # nothing left to refuse


def test_a_dry_run_is_refused_with_exit_2_before_anything_is_printed(tmp_path):
    root = Path(__file__).resolve().parents[3]
    config = filled(tmp_path, "mi3xx_megatron_llama-3.1-8b_distributed.json", master_addr="127.0.0.9")
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"username": "ops", "priv_key_file": str(tmp_path / "key"),
                                   "node_dict": {"127.0.0.8": {}, "127.0.0.9": {}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVOKE_CVS_")}
    env["CVS_REPORTS_DIR"] = str(tmp_path / "reports")
    proc = subprocess.run([sys.executable, "-m", "invoke", "-r", str(root), "all", "--config", str(config),
                           "--cluster", str(cluster), "--dry-run"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"config error in {config}" in proc.stderr
    assert "container.env.MASTER_ADDR: 127.0.0.9 is host 1 in" in proc.stderr and "Traceback" not in proc.stderr
    assert "[dry-run]" not in proc.stdout and not (tmp_path / "reports").exists()
