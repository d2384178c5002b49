"""The `config` invoke namespace: called directly with an invoke Context, exit codes checked."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from config_helpers import minimal_config
from invoke import Context
from invoke.exceptions import Exit

from cvs_tasks.tasks import config as config_tasks


def test_namespace_has_the_five_tasks_with_help():
    ns = config_tasks.ns
    assert ns.name == "config"
    assert set(ns.task_names) == {"list", "copy", "validate", "show", "schema"}
    for name in ns.task_names:
        task = ns[name]
        assert task.__doc__
        params = list(task.argspec(task.body).parameters)
        assert set(task.help) == set(params), name


def test_validate_prints_the_resolved_suite_and_exits_0(suite_files, capsys, tmp_path):
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"username": "u", "priv_key_file": None, "node_dict": {"localhost": {}}}))
    config = minimal_config()
    config["train_params"]["tokenizer_model"] = "deepseek-ai/DeepSeek-V2-Lite"  # not gated: the token is optional
    config_tasks.validate(Context(), config=str(suite_files(config)), cluster=str(cluster))
    out = capsys.readouterr().out
    assert "suite      single (Megatron-LM, MI300X x 8)" in out
    assert "hosts      1: localhost (local)" in out
    assert "MBS=4,GBS=128,PRECISION=FP8" in out and "training_iterations=20" in out
    assert "warning: paths.hf_token_file" in out
    assert out.rstrip().endswith("OK: the config is valid")


def test_validate_guesses_distributed_from_hosts(suite_files, capsys, tmp_path):
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"username": "u", "priv_key_file": "/k", "node_dict": ["10.0.0.1", "10.0.0.2"]}))
    config = minimal_config(paths={**minimal_config()["paths"], "hf_token_file": str(write_token(tmp_path))})
    config["container"]["env"].update(MASTER_ADDR="10.0.0.1", NCCL_SOCKET_IFNAME="ens1", GLOO_SOCKET_IFNAME="ens1",
                                      NCCL_IB_HCA="bnxt_re0")
    config_tasks.validate(Context(), config=str(suite_files(config, name="suite.json")), cluster=str(cluster))
    out = capsys.readouterr().out
    assert "suite      distributed" in out


def test_validate_refuses_a_distributed_run_that_could_not_start_listing_every_problem(suite_files, tmp_path):
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"username": "u", "priv_key_file": "/k", "node_dict": ["10.0.0.1", "10.0.0.2"]}))
    config = minimal_config(paths={**minimal_config()["paths"], "hf_token_file": str(tmp_path / "missing")})
    config["container"]["env"]["MASTER_ADDR"] = "127.0.0.1"
    with pytest.raises(Exit) as info:
        config_tasks.validate(Context(), config=str(suite_files(config, name="suite.json")), cluster=str(cluster))
    assert info.value.code == 2
    message = info.value.message
    for where in ("container.env.NCCL_SOCKET_IFNAME", "container.env.GLOO_SOCKET_IFNAME", "container.env.NCCL_IB_HCA",
                  "container.env.MASTER_ADDR: 127.0.0.1 is not one of the hosts", "paths.hf_token_file"):
        assert where in message
    assert "suite.json" in message and "meta-llama/Llama-3.1-8B" in message


def write_token(tmp_path):
    path = tmp_path / "hf_token"
    path.write_text("hf_test_token\n")
    return path


def test_validate_refuses_a_single_config_on_two_hosts_as_the_run_does(suite_files, tmp_path):
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"username": "u", "priv_key_file": "/k", "node_dict": ["10.0.0.1", "10.0.0.2"]}))
    with pytest.raises(Exit) as info:
        config_tasks.validate(Context(), config=str(suite_files()), cluster=str(cluster))
    assert info.value.code == 2
    assert "single-node config but the cluster file lists 2 hosts" in info.value.message


def test_validate_exits_2_with_every_problem(suite_files):
    config = minimal_config(gpu_name="MI1")
    config["container"]["env"]["NNODES"] = "2"
    with pytest.raises(Exit) as info:
        config_tasks.validate(Context(), config=str(suite_files(config)))
    assert info.value.code == 2
    assert "gpu_name: must be one of" in info.value.message
    assert "container.env.NNODES:" in info.value.message


def test_validate_exits_2_on_a_broken_cluster_file(suite_files, tmp_path):
    cluster = tmp_path / "cluster.json"
    cluster.write_text("{")
    with pytest.raises(Exit) as info:
        config_tasks.validate(Context(), config=str(suite_files()), cluster=str(cluster))
    assert info.value.code == 2 and "line 1 column 2" in info.value.message


def test_show_prints_redacted_json(suite_files, capsys):
    config = minimal_config()
    config["container"]["runtime"]["args"] = {"registry": {"username": "u", "password_file": "/pw"}}
    config["train_params"]["my_secret"] = "s3"
    config_tasks.show(Context(), config=str(suite_files(config)))
    shown = json.loads(capsys.readouterr().out)
    assert shown["train_params"]["my_secret"] == "***"
    assert shown["gpu_name"] == "MI300X"


def test_schema_prints_json_schema(capsys):
    config_tasks.schema(Context())
    assert json.loads(capsys.readouterr().out)["title"] == "cvs-tasks suite config"


def test_list_and_copy(capsys, tmp_path):
    config_tasks.list_(Context(), filter="405b")
    out = capsys.readouterr().out
    assert "mi3xx_megatron_llama-3.1-405b_distributed.json" in out and "8b_single" not in out
    config_tasks.copy(Context(), "localhost.json", output=str(tmp_path), with_thresholds=True)
    assert (tmp_path / "localhost.json").is_file()
    with pytest.raises(Exit) as info:
        config_tasks.copy(Context(), "localhost.json", output=str(tmp_path))
    assert info.value.code == 2 and "--force" in info.value.message


def test_invoke_cli_exit_status(suite_files, tmp_path):
    (tmp_path / "tasks.py").write_text(
        "from invoke import Collection\nfrom cvs_tasks.tasks.config import ns as config\n"
        "ns = Collection()\nns.add_collection(config)\n")
    bad = suite_files(minimal_config(gpu_name="MI1"))
    run = subprocess.run([sys.executable, "-m", "invoke", "config.validate", "--config", str(bad)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "gpu_name: must be one of" in run.stderr and "Traceback" not in run.stderr
    good = suite_files(minimal_config(paths={**minimal_config()["paths"], "hf_token_file": str(write_token(tmp_path))}))
    run = subprocess.run([sys.executable, "-m", "invoke", "config.validate", "--config", str(good)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
