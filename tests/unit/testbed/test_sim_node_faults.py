"""Per-node testbed faults and versions: a node knows itself, its slowdown and crash hit only it."""
from __future__ import annotations

import re
import sys

from simrun import WORKSPACE, megatron_cmd, run_sim, sim_env

sys.path.insert(0, str(WORKSPACE))
from simtrainer.node_facts import node_index  # noqa: E402
from simtrainer.spec import node_fault_entries  # noqa: E402

MOUNTINFO = ("612 598 0:52 / / rw,relatime - overlay overlay rw\n"
             "640 612 8:1 /tmp/cvs-testbed/nodes/node1/data/containers/ab12/hostname /etc/hostname rw - ext4 "
             "/dev/sda1 rw\n")


def test_a_container_knows_its_node_from_its_daemons_data_root(monkeypatch):
    monkeypatch.delenv("CVS_SIM_NODE_DIR", raising=False)
    assert node_index(MOUNTINFO) == 1
    assert node_index("612 598 0:52 / / rw - overlay overlay rw\n") is None
    monkeypatch.setenv("CVS_SIM_NODE_DIR", "/tmp/cvs-testbed/nodes/node3")
    assert node_index(MOUNTINFO) == 3


def test_node_faults_aim_at_the_nodes_own_rank():
    assert node_fault_entries("slow=1.5", 1) == "slow_node=1:1.5"
    assert node_fault_entries("crash@3\nslow=2", 0) == "crash@3:0,slow_node=0:2"
    assert node_fault_entries("", 2) == ""


def steps_ms(out: str) -> list[float]:
    return [float(m) for m in re.findall(r"elapsed time per iteration \(ms\): ([\d.]+)", out)]


def test_a_slow_node_file_slows_only_that_node(tmp_path):
    faults = tmp_path / "faults"
    faults.mkdir()
    (faults / "node1").write_text("slow=2.0\n")
    base = sim_env(TOTAL_ITERS="6", SIM_NODE_FAULTS=str(faults), CVS_SIM_NODE_DIR=str(tmp_path / "nodes/node0"))
    fast = run_sim(megatron_cmd(), base)
    slow = run_sim(megatron_cmd(), {**base, "CVS_SIM_NODE_DIR": str(tmp_path / "nodes/node1")})
    assert fast.code == 0 and slow.code == 0, slow.text
    f, s = steps_ms(fast.text)[-1], steps_ms(slow.text)[-1]
    assert 1.8 < s / f < 2.2


def test_a_crash_file_crashes_only_that_node(tmp_path):
    faults = tmp_path / "faults"
    faults.mkdir()
    (faults / "node1").write_text("crash@3")
    env = sim_env(TOTAL_ITERS="6", SIM_NODE_FAULTS=str(faults), CVS_SIM_NODE_DIR=str(tmp_path / "nodes/node1"))
    crashed = run_sim(megatron_cmd(), env)
    assert crashed.code == 139 and "Segmentation fault" in crashed.text
