"""The stand-in primus-cli is as strict as Primus + Megatron about override types: text that stays a
string fails at start with Megatron's own words; the harness's typed overrides pass on every version."""
from __future__ import annotations

import shlex

import pytest
from simrun import PRIMUS_ROOT, primus_cmd, run_sim, sim_env

from cvs_tasks.jobs.primus import train_arguments
from cvs_tasks.jobs.spec import JobSpec

CONFIG_8B = "examples/megatron/configs/MI300X/llama3.1_8B-BF16-pretrain.yaml"
CONFIG_70B = "examples/megatron/configs/MI300X/llama3.3_70B-BF16-pretrain.yaml"
SHORT = ["--micro_batch_size", "1", "--global_batch_size", "8", "--train_iters", "3"]
VERSIONS = ("v0.4.0", "v0.5.0", "v0.6.0", "HEAD")


def _arg(text: str, name: str) -> str | None:
    for line in text.splitlines():
        if f" {name} ..." in line:
            return line.rsplit(" ", 1)[-1]
    return None


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("spelling", ["null", "none"])
def test_a_string_recompute_granularity_stops_the_run_after_the_dump_with_megatrons_error(version, spelling):
    run = run_sim(primus_cmd(CONFIG_8B, *SHORT, "--recompute_granularity", spelling),
                  sim_env(SIM_PRIMUS_VERSION=version), cwd=PRIMUS_ROOT)
    assert run.code != 0
    assert (f'ValueError: When using recompute_granuarlity: {spelling} must be "full"or "selective".'
            in run.text), run.text[-1500:]
    assert _arg(run.text, "recompute_granularity") == spelling  # the dump printed the string first
    assert run.iterations() == []


@pytest.mark.parametrize("version, fails", [("v0.4.0", True), ("v0.5.0", True), ("v0.6.0", False), ("HEAD", False)])
def test_fsdp2_false_as_text_is_on_where_primus_keeps_the_string_and_asserts_with_the_distributed_optimizer(
        version, fails):
    run = run_sim(primus_cmd(CONFIG_8B, *SHORT, "--use_torch_fsdp2", "false"),
                  sim_env(SIM_PRIMUS_VERSION=version), cwd=PRIMUS_ROOT)
    assert (run.code != 0) is fails, run.text[-1500:]
    assertion = "AssertionError: --use-torch-fsdp2 is not supported with MCore's distributed optimizer"
    assert (assertion in run.text) is fails
    if fails:
        assert _arg(run.text, "use_torch_fsdp2") is None  # validate_args asserts before the dump
    else:
        assert _arg(run.text, "use_torch_fsdp2") == "False"


def test_the_70b_yaml_turns_fsdp2_on_without_the_distributed_optimizer_and_runs():
    run = run_sim(primus_cmd(CONFIG_70B, *SHORT), sim_env(), cwd=PRIMUS_ROOT)
    assert run.code == 0, run.text[-1500:]
    assert (_arg(run.text, "use_torch_fsdp2"), _arg(run.text, "use_distributed_optimizer")) == ("True", "False")
    assert _arg(run.text, "recompute_granularity") == "full"


def test_an_unknown_primus_version_is_refused():
    run = run_sim(primus_cmd(CONFIG_8B, *SHORT), sim_env(SIM_PRIMUS_VERSION="v9"), cwd=PRIMUS_ROOT)
    assert run.code != 0 and "SIM_PRIMUS_VERSION='v9': expected one of v0.4.0, v0.5.0, v0.6.0, HEAD" in run.text


def _harness_overrides(recompute: str, fsdp: str) -> list[str]:
    params = {"model_name": "llama3.1_8B", "sequence_length": "8192", "recompute": recompute, "fsdp": fsdp,
              "tensor_parallelism": "1", "pipeline_parallelism": "1"}
    job = JobSpec(backend="primus", label="MBS=1,GBS=8,PRECISION=BF16", gpu_name="MI300X", image="", runtime="docker",
                  nnodes=1, distributed=False, mbs="1", gbs="8", precision="BF16", iterations=3, train_params=params,
                  log_dir="/l", scripts_dir="/s", data_cache_dir="/c", rocm_dir="", env={}, hf_token_path=None,
                  tokenizer_path=None, save_dir=None, save_interval=None, load_dir=None, run_id="r")
    words = shlex.split(train_arguments(job, CONFIG_8B))
    return words[words.index("--config") + 2:]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_harness_own_overrides_pass_on_every_version(version):
    for recompute in ("0", "1"):
        run = run_sim(primus_cmd(CONFIG_8B, *_harness_overrides(recompute, "0")),
                      sim_env(SIM_PRIMUS_VERSION=version), cwd=PRIMUS_ROOT)
        assert run.code == 0, run.text[-1500:]
        assert run.iterations() == [1, 2, 3]
        assert _arg(run.text, "use_torch_fsdp2") == "False"
        assert _arg(run.text, "recompute_granularity") == ("full" if recompute == "1" else "None")
