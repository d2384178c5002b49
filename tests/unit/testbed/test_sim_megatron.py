"""The simulated Megatron-LM entry points print parse-able ROCm-fork / upstream logs."""
from __future__ import annotations

import re

import pytest
from simrun import WORKSPACE, megatron_cmd, run_sim, sim_env

LLAMA_8B_FLOPS_PER_TOKEN = 51.4704e9     # current Megatron formula, seq 8192 (docs/log_formats.md#flops-per-token)


def _segment(line: str, label: str) -> float:
    return float(re.search(re.escape(label) + r":\s+([0-9.]+)", line).group(1))


def test_llama3_prints_every_iteration_with_consistent_throughput():
    run = run_sim(megatron_cmd(), sim_env(MBS="2", BS="16", TOTAL_ITERS="12", TE_FP8="1", MODEL_SIZE="8"))
    assert run.code == 0, run.stdout[-2000:]
    assert run.iterations() == list(range(1, 13))
    for line in run.text.splitlines():
        if " iteration " in line and "elapsed time per iteration (ms)" in line:
            ms = _segment(line, "elapsed time per iteration (ms)")
            tokens = 16 * 8192 / (ms / 1000) / 8
            assert _segment(line, "throughput per GPU (TFLOP/s/GPU)") == pytest.approx(
                tokens * LLAMA_8B_FLOPS_PER_TOKEN / 1e12, rel=2e-3)
            assert "mem usages:" in line
            assert re.match(r" \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] iteration ", line)


def test_loss_decreases_and_steady_state_step_time_is_the_configured_one():
    run = run_sim(megatron_cmd(), sim_env(TOTAL_ITERS="20", SIM_STEP_MS="2000"))
    losses = run.losses()
    assert losses[20] < losses[10] < losses[3]
    times = [float(t) for t in re.findall(r"elapsed time per iteration \(ms\): ([0-9.]+)", run.text)]
    assert len(times) == 20
    assert times[0] > 2 * 2000                          # first iteration includes warm-up
    assert all(1960 <= t <= 2040 for t in times[2:])    # ±1.5 % jitter around SIM_STEP_MS


def test_rocm_summary_lines_follow_the_log_and_agree_with_the_iterations():
    run = run_sim(megatron_cmd(), sim_env(MBS="1", BS="8", TOTAL_ITERS="8"))
    tail = run.text.strip().splitlines()[-4:]
    assert [t.split(":")[0] for t in tail] == ["throughput per GPU", "elapsed time per iteration",
                                               "tokens/GPU/s", "mem usages"]
    ms = float(tail[1].split(":")[1])
    assert float(tail[2].split(":")[1]) == pytest.approx(8 * 8192 * 1000 / (ms * 8), rel=1e-4)


def test_upstream_dialect_has_microseconds_and_no_rocm_extras():
    run = run_sim(megatron_cmd(), sim_env(TOTAL_ITERS="4", SIM_LOG_DIALECT="upstream"))
    lines = [l for l in run.text.splitlines() if "elapsed time per iteration (ms)" in l]
    assert len(lines) == 4
    assert all(re.match(r" \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}\] iteration", l) for l in lines)
    assert "mem usages" not in run.text
    assert "tokens/GPU/s" not in run.text


def test_start_up_noise_is_present_and_benign():
    run = run_sim(megatron_cmd(), sim_env(TOTAL_ITERS="3", NCCL_DEBUG="ERROR"))
    text = run.text
    assert "NCCL_DEBUG=ERROR" in text
    assert re.search(r"^  seq_length \.+ 8192$", text, re.M)
    assert re.search(r"^  global_batch_size \.+ 128$", text, re.M)
    assert re.search(r"^  world_size \.+ 8$", text, re.M)
    assert "Unable to save MockGPTDataset indexes because path_to_cache is None" in text
    assert "[Rank 0] (after 1 iterations) memory (MB)" in text
    assert "NCCL ERROR" not in text and "Traceback" not in text


def test_the_tee_copy_goes_to_log_dir_and_train_log_is_ignored_as_by_the_real_scripts(tmp_path):
    ignored = tmp_path / "ignored.log"
    run = run_sim(megatron_cmd(), sim_env(TOTAL_ITERS="3", LOG_DIR=str(tmp_path / "out"), EXP_NAME="exp",
                                          TRAIN_LOG=str(ignored)))
    assert (tmp_path / "out" / "output_exp.log").read_text() == run.stdout
    assert not ignored.exists()


@pytest.mark.parametrize("script, env, expect", [
    ("examples/deepseek_v2/train_deepseekv2.sh", {"MBS": "4", "GBS": "64", "TRAIN_ITERS": "3", "PR": "fp8"},
     {"global_batch_size": "64", "train_iters": "3", "fp8": "hybrid", "num_layers": "27"}),
    ("examples/mixtral/train_mixtral_moe.sh", {"GBS": "32", "TRAIN_ITERS": "2", "TP_SIZE": "2", "SEQLEN": "2048"},
     {"global_batch_size": "32", "tensor_model_parallel_size": "2", "seq_length": "2048"}),
    ("examples/qwen3/train_qwen3.sh", {"MICRO_BATCH_SIZE": "3", "GLOBAL_BATCH_SIZE": "48", "TRAIN_ITERS": "2"},
     {"micro_batch_size": "3", "global_batch_size": "48"}),
    ("examples/qwen2/train_qwen2.sh", {"MBS": "1", "BS": "24", "TOTAL_ITERS": "2"}, {"global_batch_size": "24"}),
    ("examples/llama/train_llama2.sh", {"MBS": "1", "BS": "8", "TOTAL_ITERS": "2", "MODEL_SIZE": "13"},
     {"num_layers": "40"}),
    ("examples/llama/train_llama3.sh", {"MBS": "1", "BS": "8", "TOTAL_ITERS": "2", "MODEL_SIZE": "70"},
     {"num_layers": "80"}),
])
def test_each_family_reads_its_own_env_names(script, env, expect):
    run = run_sim(megatron_cmd(script), sim_env(**env))
    assert run.code == 0, run.stdout[-1500:]
    for name, value in expect.items():
        assert re.search(rf"^  {name} \.+ {re.escape(value)}$", run.text, re.M), name
    total = env.get("TRAIN_ITERS") or env.get("TOTAL_ITERS")
    assert run.iterations()[-1] == int(total)


def test_scripts_are_thin_and_locate_the_simulator_from_their_own_path():
    script = (WORKSPACE / "Megatron-LM/examples/llama/train_llama3.sh").read_text()
    assert "TRAIN_LOG=\"${LOG_DIR:+" in script and "readlink -f" in script
    assert len(script.splitlines()) < 15


def _arg(run, name):
    match = re.search(rf"^  {name} \.+ (.*)$", run.text, re.M)
    return match.group(1) if match else None


def test_deepseek_reads_seq_len_and_ac_and_pins_one_node_and_the_exit_interval():
    """As the real train_deepseekv2.sh: SEQ_LENGTH and RECOMPUTE are not its names; NNODES is pinned."""
    env = {"MBS": "1", "GBS": "16", "TRAIN_ITERS": "60", "SEQ_LENGTH": "4096", "RECOMPUTE": "0",
           "NNODES": "2", "NODE_RANK": "1", "MASTER_ADDR": "10.9.9.9", "TP": "2", "MODEL_SIZE": "16"}
    run = run_sim(megatron_cmd("examples/deepseek_v2/train_deepseekv2.sh"), sim_env(**env))
    assert run.code == 0, run.stdout[-1500:]
    assert ((_arg(run, "seq_length"), _arg(run, "world_size"), _arg(run, "tensor_model_parallel_size"))
            == ("2048", "8", "1"))
    assert _arg(run, "recompute_granularity") == "selective" and _arg(run, "exit_interval") == "50"
    assert _arg(run, "tokenizer_model") == "deepseek-ai/DeepSeek-V2-Lite"
    assert run.iterations()[-1] == 50 and "[exiting program at iteration 50]" in run.text
    honoured = run_sim(megatron_cmd("examples/deepseek_v2/train_deepseekv2.sh"),
                       sim_env(MBS="1", GBS="8", TRAIN_ITERS="2", SEQ_LEN="4096", AC="none"))
    assert (_arg(honoured, "seq_length"), _arg(honoured, "recompute_granularity")) == ("4096", "None")


def test_megatron_asserts_the_batch_layout_after_the_dump():
    run = run_sim(megatron_cmd(), sim_env(MBS="1", BS="12", TOTAL_ITERS="2"))
    assert run.code != 0 and run.iterations() == []
    assert "AssertionError: global batch size (12) is not divisible by micro batch size (1) times data " \
           "parallel size (8)" in run.text
    assert run.text.index("end of arguments") < run.text.index("AssertionError")
    bad_tp = run_sim(megatron_cmd(), sim_env(MBS="1", BS="8", TP="3", TOTAL_ITERS="2"))
    assert bad_tp.code != 0 and "world size (8) is not divisible by tensor parallel size (3)" in bad_tp.text


def test_an_unknown_model_size_stops_the_script_before_torchrun():
    run = run_sim(megatron_cmd(), sim_env(MBS="1", BS="8", TOTAL_ITERS="2", MODEL_SIZE="9"))
    assert run.code == 1 and "Model size not supported: MODEL_SIZE=9" in run.text and "arguments" not in run.text


def test_precision_flags_in_the_dump_say_what_trains():
    fp8 = run_sim(megatron_cmd(), sim_env(MBS="1", BS="8", TOTAL_ITERS="1", TE_FP8="1", TE_FP8_RECIPE="mxfp8"))
    assert (_arg(fp8, "fp8"), _arg(fp8, "fp8_recipe")) == ("hybrid", "mxfp8")
    qwen2 = run_sim(megatron_cmd("examples/qwen2/train_qwen2.sh"),
                    sim_env(MBS="1", BS="8", TOTAL_ITERS="1", TE_FP8="1", TE_FP8_RECIPE="mxfp8"))
    assert _arg(qwen2, "fp8_recipe") == "delayed"  # a script that does not read the recipe trains delayed FP8
