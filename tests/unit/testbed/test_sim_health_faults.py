"""The node-health faults of the simulated trainer: the job completes, the node's counters tree
and kernel log show the fault, and the harness's own snapshot command reads them back."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from simrun import WORKSPACE, megatron_cmd, run_sim, sim_env

from cvs_tasks.health import judge_health, node_health, parse_snapshot
from cvs_tasks.remote.health import snapshot_command

sys.path.insert(0, str(WORKSPACE))
from simtrainer import node_sys  # noqa: E402


def node(tmp_path: Path, index: int = 1) -> tuple[Path, dict]:
    folder = tmp_path / "node-sys" / f"node{index}"
    node_sys.seed(folder)
    env = sim_env(TOTAL_ITERS="6", SIM_NODE_SYS=str(tmp_path / "node-sys"),
                  CVS_SIM_NODE_DIR=str(tmp_path / "nodes" / f"node{index}"))
    return folder, env


def counter(folder: Path, device: str, kind: str, name: str) -> int:
    return int((folder / "infiniband" / device / "ports" / "1" / kind / name).read_text())


def snapshot(folder: Path, start=None):
    bin_dir = WORKSPACE / "bin"
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", CVS_SIM_NODE_SYS=str(folder))
    out = subprocess.run(["bash", "-c", snapshot_command(start, ib_root=str(folder / "infiniband"))],
                         env=env, capture_output=True, text=True, timeout=30)
    return parse_snapshot(out.stdout)


def test_seeding_keeps_existing_values(tmp_path):
    folder, _ = node(tmp_path)
    node_sys.bump(folder, "rocep0s0f0", "1", "counters", "symbol_error", 4)
    node_sys.seed(folder)
    assert counter(folder, "rocep0s0f0", "counters", "symbol_error") == 4
    assert (folder / "kmsg").read_text().startswith("[    0.000000] Linux version")


def test_a_clean_job_moves_data_but_no_error_counter(tmp_path):
    folder, env = node(tmp_path)
    before = snapshot(folder)
    assert run_sim(megatron_cmd(), env).code == 0
    assert counter(folder, "rocep0s0f0", "counters", "port_xmit_data") > 0
    net, kernel = judge_health([node_health("n", before, snapshot(folder, before.klog_mark))], enforce_network=True)
    assert (net.status, kernel.status) == ("PASS", "PASS"), (net.summary, kernel.summary)


def test_link_errors_grow_the_link_error_counter_and_the_job_completes(tmp_path):
    folder, env = node(tmp_path)
    before = snapshot(folder)
    done = run_sim(megatron_cmd(), {**env, "SIM_FAULT": "link_errors@3"})
    assert done.code == 0, done.text
    net, _ = judge_health([node_health("n", before, snapshot(folder, before.klog_mark))], enforce_network=True)
    assert net.status == "FAIL"
    assert [(r["device"], r["counter"], r["delta"]) for r in net.rows] == [("rocep1s0f0", "link_error_recovery", 3)]


def test_gpu_reset_writes_amdgpu_lines_stamped_after_the_mark(tmp_path):
    folder, env = node(tmp_path)
    before = snapshot(folder)
    done = run_sim(megatron_cmd(), {**env, "SIM_FAULT": "gpu_reset@2"})
    assert done.code == 0, done.text
    _, kernel = judge_health([node_health("n", before, snapshot(folder, before.klog_mark))], enforce_network=True)
    assert kernel.status == "FAIL"
    assert [r["kind"] for r in kernel.rows] == ["ring_timeout", "gpu_reset", "gpu_reset"]
    assert kernel.rows[1]["line"].endswith("amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!")


def test_a_fault_aimed_at_another_node_leaves_this_one_alone(tmp_path):
    folder, env = node(tmp_path, index=0)
    done = run_sim(megatron_cmd(), {**env, "SIM_FAULT": "link_errors@3:1"})
    assert done.code == 0
    assert counter(folder, "rocep1s0f0", "counters", "link_error_recovery") == 0
