"""The simulated primus-cli: Primus line shapes, tee'd log file, checkpoints, config errors."""
from __future__ import annotations

import re

import pytest
from simrun import ANSI, PRIMUS_ROOT, primus_cmd, run_sim, sim_env

CONFIG_8B = "examples/megatron/configs/MI300X/llama3.1_8B-BF16-pretrain.yaml"
ARGS = ["--micro_batch_size", "2", "--global_batch_size", "16", "--train_iters", "8",
        "--tensor_model_parallel_size", "1", "--pipeline_model_parallel_size", "1"]


def test_b3_lines_have_single_values_for_two_warmup_steps_then_pairs(tmp_path):
    log = tmp_path / "training.log"
    run = run_sim(primus_cmd(CONFIG_8B, *ARGS, log_file=log), sim_env(), cwd=PRIMUS_ROOT)
    assert run.code == 0, run.stdout[-2000:]
    lines = [l for l in run.text.splitlines() if "elapsed time per iteration" in l]
    assert len(lines) == 8
    assert all(re.match(r"\[\d{8} \d\d:\d\d:\d\d\]\[rank-7/8\]\[DEBUG\]\s+\[-+utils\.py:425\] : "
                        r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}\] iteration", l) for l in lines)
    assert "tokens/s/GPU" not in lines[0] + lines[1]
    assert "throughput per GPU (TFLOP/s/GPU): " in lines[1]
    pair = re.search(r"compute per GPU \(TFLOP/s/GPU\): ([0-9.]+) \(avg ([0-9.]+)\)  \| "
                     r"tokens/s/GPU inst/harmonic mean: ([0-9.]+)/([0-9.]+)", lines[5])
    assert pair, lines[5]
    ms = float(re.search(r"\(ms\): ([0-9.]+)/", lines[5]).group(1))
    assert float(pair.group(3)) == pytest.approx(16 * 8192 / (ms / 1000) / 8, rel=1e-3)
    assert lines[-1].rstrip().endswith("%")          # B shape: memory segment at the end, no trailing '|'
    assert "\x1b[" in run.stdout                     # loguru console sink is colourised


def test_worker_lines_are_teed_but_runner_lines_stay_on_the_console(tmp_path):
    log = tmp_path / "out-node0" / "training.log"
    run = run_sim(primus_cmd(CONFIG_8B, *ARGS, log_file=log), sim_env(), cwd=PRIMUS_ROOT)
    teed = log.read_text()
    assert "[direct] torchrun finished successfully (code 0)" in run.stdout
    assert "torchrun finished" not in teed and "Primus Direct Launch Configuration" not in teed
    assert "iteration        8/       8" in ANSI.sub("", teed)
    assert "Training completed." in teed


@pytest.mark.parametrize("style, marker", [
    ("b1", "tokens per GPU (tokens/s/GPU): "),
    ("b2", "throughput per GPU (TFLOP/s/GPU): "),
    ("legacy", "[rank-7/8][INFO ] [--------trainer.py:2560] :  iteration"),
])
def test_older_primus_styles(style, marker):
    run = run_sim(primus_cmd(CONFIG_8B, *ARGS), sim_env(SIM_PRIMUS_STYLE=style), cwd=PRIMUS_ROOT)
    last = [l for l in run.text.splitlines() if "elapsed time per iteration" in l][-1]
    assert marker in last
    assert re.search(r"\(ms\): [0-9.]+/[0-9.]+", last)


def test_missing_experiment_yaml_exits_2_with_the_path():
    run = run_sim(primus_cmd("examples/megatron/configs/MI325X/llama3.1_8B-BF16-pretrain.yaml", *ARGS),
                  sim_env(), cwd=PRIMUS_ROOT)
    assert run.code == 2
    assert ("FileNotFoundError: [Errno 2] No such file or directory: "
            "'examples/megatron/configs/MI325X/llama3.1_8B-BF16-pretrain.yaml'") in run.text


@pytest.mark.parametrize("gpu", ["MI300X", "MI355X"])
@pytest.mark.parametrize("model", ["llama3.1_8B", "llama3.3_70B", "deepseek_v2_lite", "llama3.1_405B"])
@pytest.mark.parametrize("precision", ["BF16", "FP8"])
def test_every_shipped_experiment_yaml_exists(gpu, model, precision):
    assert (PRIMUS_ROOT / f"examples/megatron/configs/{gpu}/{model}-{precision}-pretrain.yaml").is_file()
    assert not (PRIMUS_ROOT / "examples/megatron/configs/MI325X").exists()   # harness falls back to MI300X


def _ckpt_env(workspace):
    return sim_env(PRIMUS_WORKSPACE=str(workspace), PRIMUS_TEAM="", PRIMUS_USER="", PRIMUS_EXP_NAME="")


def test_checkpoint_save_then_resume_continues_the_curve(tmp_path):
    save_args = ["--micro_batch_size", "1", "--global_batch_size", "8", "--train_iters", "21",
                 "--save", "--save_interval", "10"]
    saved = run_sim(primus_cmd(CONFIG_8B, *save_args), _ckpt_env(tmp_path), cwd=PRIMUS_ROOT)
    assert saved.code == 0, saved.stdout[-2000:]
    ckpt = tmp_path / "checkpoints"
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "20"
    assert sorted(p.name for p in ckpt.glob("iter_*")) == ["iter_0000010", "iter_0000020"]
    assert re.search(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}\] saving checkpoint at iteration\s+20 to ", saved.text)
    assert re.search(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}\] successfully saved checkpoint from iteration\s+20",
                     saved.text)
    resume_args = ["--micro_batch_size", "1", "--global_batch_size", "8", "--train_iters", "25",
                   "--load", str(ckpt)]
    resumed = run_sim(primus_cmd(CONFIG_8B, *resume_args), _ckpt_env(tmp_path), cwd=PRIMUS_ROOT)
    assert resumed.code == 0, resumed.stdout[-2000:]
    assert f"loading checkpoint from {ckpt} at iteration 20" in resumed.text
    assert f"successfully loaded checkpoint from {ckpt} [ t 1/1, p 1/1 ] at iteration 20" in resumed.text
    assert resumed.iterations() == [21, 22, 23, 24, 25]
    assert resumed.losses()[21] == saved.losses()[21]
    assert resumed.losses()[21] <= saved.losses()[20] * 1.05


def test_resume_without_a_checkpoint_starts_from_scratch(tmp_path):
    run = run_sim(primus_cmd(CONFIG_8B, "--train_iters", "3", "--load", str(tmp_path / "none")),
                  sim_env(), cwd=PRIMUS_ROOT)
    assert run.code == 0
    assert "could not find the metadata file" in run.text
    assert run.iterations() == [1, 2, 3]


def test_the_405b_yaml_pins_exp_name_so_checkpoints_land_in_its_folder(tmp_path):
    """As in Primus: `exp_name: exp-llama3_405B-pretrain` is not a placeholder, so the emptied
    PRIMUS_EXP_NAME does not reach it and the checkpoints land one folder deeper."""
    config = "examples/megatron/configs/MI300X/llama3.1_405B-BF16-pretrain.yaml"
    args = ["--micro_batch_size", "1", "--global_batch_size", "8", "--train_iters", "11", "--save",
            "--save_interval", "10",
            # the YAML's TP8 x PP4 needs 4 nodes
            "--tensor_model_parallel_size", "1", "--pipeline_model_parallel_size", "1"]
    saved = run_sim(primus_cmd(config, *args), _ckpt_env(tmp_path), cwd=PRIMUS_ROOT)
    assert saved.code == 0, saved.stdout[-2000:]
    assert (tmp_path / "exp-llama3_405B-pretrain" / "checkpoints" / "latest_checkpointed_iteration.txt").is_file()
    assert not (tmp_path / "checkpoints").exists()
