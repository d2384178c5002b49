"""Each SIM_FAULT prints the real error text (docs/log_formats.md#error-signatures) and exits the way real jobs do."""
from __future__ import annotations

import time

import pytest
from simrun import PRIMUS_ROOT, megatron_cmd, primus_cmd, run_sim, sim_env


@pytest.mark.parametrize("fault, code, texts, last_step", [
    ("oom@3", 1, ["torch.OutOfMemoryError: HIP out of memory. Tried to allocate",
                  "torch.distributed.elastic.multiprocessing.errors.ChildFailedError"], 2),
    ("gpu_fault@4", 1, ["Memory access fault by GPU node-", "Reason: Page not present or supervisor privilege.",
                        "exitcode  : -6", "Signal 6 (SIGABRT) received by PID"], 3),
    ("nan@6", 1, ["Unexpected result nan on rank", "found NaN in local grad norm",
                  "Saving a checkpoint and exiting now", "exitcode  : 16"], 5),
    ("crash@4", 139, ["Segmentation fault", "Fatal Python error: Segmentation fault"], 3),
    ("nccl_timeout@5", 1, ["Watchdog caught collective operation timeout: WorkNCCL(SeqNum=",
                           "Timeout(ms)=1000) ran for", "To avoid data inconsistency, we are taking the entire "
                           "process down.", "exitcode  : -6"], 4),
])
def test_fault_texts_and_exit_codes(fault, code, texts, last_step):
    run = run_sim(megatron_cmd(), sim_env(TOTAL_ITERS="10", SIM_FAULT=fault, SIM_NCCL_TIMEOUT_S="1"))
    assert run.code == code, run.stdout[-1500:]
    for text in texts:
        assert text in run.text
    assert run.iterations()[-1] == last_step
    assert "throughput per GPU:" not in run.text      # no ROCm summary after a failure


def test_hang_stops_printing_and_is_bounded():
    started = time.monotonic()
    run = run_sim(megatron_cmd(), sim_env(TOTAL_ITERS="10", SIM_FAULT="hang@5", SIM_HANG_S="1.5"))
    assert time.monotonic() - started >= 1.5
    assert run.iterations()[-1] == 4
    assert "watchdog got stuck for 1 seconds" in run.text
    assert run.code == 1


def test_silent_nan_loss_drops_lm_loss_and_counts_nan_iterations():
    run = run_sim(megatron_cmd(), sim_env(TOTAL_ITERS="6", SIM_FAULT="nan_loss@5"))
    assert run.code == 0
    line5 = [l for l in run.text.splitlines() if "iteration        5/" in l][0]
    assert "lm loss" not in line5 and "grad norm: nan" in line5
    assert "number of nan iterations:   1" in line5



def test_silent_nan_loss_then_hang_prints_the_nan_step_and_holds():
    """The reliability suite's stand-in for a real step time: the NaN step is the last line while the job runs."""
    started = time.monotonic()
    run = run_sim(megatron_cmd(), sim_env(TOTAL_ITERS="10", SIM_FAULT="nan_loss@4,hang@5", SIM_HANG_S="0.5"))
    assert time.monotonic() - started >= 0.5
    assert run.iterations()[-1] == 4
    line4 = [l for l in run.text.splitlines() if "iteration        4/" in l][0]
    assert "number of nan iterations:   1" in line4

def test_primus_failure_adds_the_runtime_and_runner_lines():
    run = run_sim(primus_cmd("examples/megatron/configs/MI355X/llama3.1_8B-FP8-pretrain.yaml", "--train_iters", "8"),
                  sim_env(SIM_FAULT="oom@3"), cwd=PRIMUS_ROOT)
    assert run.code == 1
    assert "RuntimeError: Training execution failed: HIP out of memory at iteration 3" in run.text
    assert "[direct] torchrun exited with code 1" in run.text


def test_bad_fault_spec_is_refused_with_the_known_names():
    run = run_sim(megatron_cmd(), sim_env(SIM_FAULT="meltdown@3"))
    assert run.code != 0
    assert "unknown entry 'meltdown@3'" in run.text and "nccl_timeout" in run.text
