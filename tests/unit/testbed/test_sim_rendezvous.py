"""Two simulated nodes synchronise over real TCP: a dead, hung or slow node stalls the other."""
from __future__ import annotations

import re
import signal
import time

from simrun import ANSI, SimRun, free_port, megatron_cmd, sim_env, start_sim

ADDR = "127.0.0.1"


def _pair(port: int, iters: str = "12", **extra: str):
    common = dict(NNODES="2", MASTER_ADDR=ADDR, MASTER_PORT=str(port), TOTAL_ITERS=iters,
                  SIM_NCCL_TIMEOUT_S="3", SIM_RDZV_TIMEOUT_S="10", **extra)
    node0 = start_sim(megatron_cmd(), sim_env(NODE_RANK="0", **common))
    node1 = start_sim(megatron_cmd(), sim_env(NODE_RANK="1", **common))
    return node0, node1


def _finish(proc, timeout: float = 30) -> SimRun:
    out, _ = proc.communicate(timeout=timeout)
    return SimRun(proc.returncode, out)


def test_only_the_last_node_prints_iterations_and_both_succeed():
    node0, node1 = _pair(free_port(ADDR))
    first, last = _finish(node0), _finish(node1)
    assert first.code == 0 and last.code == 0, first.stdout[-800:] + last.stdout[-800:]
    assert first.iterations() == [] and last.iterations() == list(range(1, 13))
    assert "------------------------ arguments" in first.text and "arguments" not in last.text
    assert re.search(r"^  world_size \.+ 16$", first.text, re.M)
    assert "tokens/GPU/s:" in last.text


def test_a_killed_node_makes_the_other_fail_within_the_timeout():
    node0, node1 = _pair(free_port(ADDR), iters="400", SIM_STEP_MS="1000", SIM_TIME_SCALE="0.02")
    deadline = time.monotonic() + 15
    seen = ""
    while "iteration        3/" not in seen and time.monotonic() < deadline:
        seen += node1.stdout.readline()
    node1.send_signal(signal.SIGKILL)
    node1.wait(timeout=10)
    started = time.monotonic()
    survivor = _finish(node0, timeout=20)
    assert time.monotonic() - started < 3 + 5
    assert survivor.code == 1
    assert ("ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
            "prematurely.") in survivor.text
    assert "ChildFailedError" in survivor.text


def test_a_hung_node_makes_the_others_time_out_with_the_watchdog_text():
    node0, node1 = _pair(free_port(ADDR), iters="10", SIM_FAULT="hang@4:1", SIM_HANG_S="20")
    try:
        started = time.monotonic()
        survivor = _finish(node0, timeout=20)
        assert time.monotonic() - started < 3 + 6
        assert survivor.code == 1
        assert "Watchdog caught collective operation timeout" in survivor.text
        assert "Timeout(ms)=3000" in survivor.text
    finally:
        node1.kill()
        node1.wait(timeout=10)
    hung = ANSI.sub("", node1.stdout.read())
    assert "iteration        3/" in hung and "iteration        4/" not in hung


def test_a_slow_node_slows_everyone_and_the_log_says_so():
    node0, node1 = _pair(free_port(ADDR), iters="6", SIM_FAULT="slow_node=0:3.0", SIM_STEP_MS="1000",
                         SIM_TIME_SCALE="0.05")
    started = time.monotonic()
    last = _finish(node1)
    elapsed = time.monotonic() - started
    assert _finish(node0).code == 0 and last.code == 0
    times = [float(t) for t in re.findall(r"\(ms\): ([0-9.]+)", last.text)]
    assert all(2900 <= t <= 3100 for t in times[2:])
    assert elapsed >= 6 * 0.05 * 3.0      # the slow node really held the fast one back


def test_a_missing_peer_fails_the_rendezvous_in_bounded_time():
    port = free_port(ADDR)
    node0 = start_sim(megatron_cmd(), sim_env(NNODES="2", NODE_RANK="0", MASTER_ADDR=ADDR, MASTER_PORT=str(port),
                                              SIM_RDZV_TIMEOUT_S="1.5"))
    run = _finish(node0, timeout=20)
    assert run.code == 1
    assert "torch.distributed.DistStoreError: Timed out after 1 seconds waiting for clients. 1/2 clients joined." \
        in run.text
