"""The rocm-smi stand-in lists live simulated-trainer pids, the way the harness cleans up GPUs."""
from __future__ import annotations

import subprocess
import time

from simrun import WORKSPACE, megatron_cmd, sim_env, start_sim

ROCM_SMI = str(WORKSPACE / "bin" / "rocm-smi")


def _showpids() -> str:
    return subprocess.run(["bash", ROCM_SMI, "--showpids"], capture_output=True, text=True, timeout=30).stdout


def test_lists_a_running_trainer_and_forgets_it_after_it_is_killed():
    proc = start_sim(megatron_cmd(), sim_env(TOTAL_ITERS="5", SIM_FAULT="hang@2", SIM_HANG_S="30"))
    try:
        deadline = time.monotonic() + 10
        listing = ""
        while f"\n{proc.pid}\t" not in listing and time.monotonic() < deadline:
            listing = _showpids()
            time.sleep(0.1)
        assert f"\n{proc.pid}\tpython3" in listing, listing
        assert "No KFD PIDs currently running" not in listing
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert f"\n{proc.pid}\t" not in _showpids()
