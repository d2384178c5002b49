"""Pure parts of the testbed: FLOPs formula, deterministic schedule, fault specs, apt sources, image hash."""
from __future__ import annotations

import shutil
import sys

import pytest
from simrun import WORKSPACE

sys.path.insert(0, str(WORKSPACE))
from simtrainer import faults, models, rocm_smi, schedule  # noqa: E402

from testbed import image  # noqa: E402


@pytest.mark.parametrize("name, gflops", [("llama3.1_8B", 51.47), ("llama3.3_70B", 449.2), ("llama3.1_405B", 2524)])
def test_flops_per_token_matches_the_current_megatron_formula(name, gflops):
    model = models.MODELS[name]
    assert models.flops_per_token(model, 8192) / 1e9 == pytest.approx(gflops, rel=1e-3)


def test_loss_is_a_deterministic_decreasing_trend():
    losses = [schedule.loss_at(s) for s in range(1, 61)]
    assert losses == [schedule.loss_at(s) for s in range(1, 61)]
    assert all(b < a for a, b in zip(losses[::5], losses[5::5]))


def test_fault_spec_parsing_and_targets():
    plan = faults.parse_faults("oom@3, crash@7:0, slow_node=1:2.5")
    assert plan.at(3, node=1, nnodes=2).name == "oom"          # default rank: the last node
    assert plan.at(3, node=0, nnodes=2) is None
    assert plan.at(7, node=0, nnodes=2).name == "crash"
    assert plan.slowdown(1) == 2.5 and plan.group_slowdown(2) == 2.5 and plan.group_slowdown(1) == 1.0
    with pytest.raises(faults.FaultSpecError):
        faults.parse_faults("oom@x")


def test_showpids_format_without_and_with_processes():
    assert "No KFD PIDs currently running" in rocm_smi.showpids([])
    lines = rocm_smi.showpids([(4242, "python3")])
    assert "4242\tpython3\t8\t182536421376\t0\tUNKNOWN" in lines


def test_apt_sources_deb822_and_one_line():
    deb822 = ("Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
              "Components: main\n\nTypes: deb\nURIs: http://mirror.example/debian-security\n"
              "Suites: bookworm-security\n")
    assert image.parse_apt_sources([deb822]) == image.AptSource("http://mirror.example/debian", "bookworm")
    one_line = "deb [signed-by=/k.gpg] http://m.example/debian trixie main\n"
    assert image.parse_apt_sources(["", one_line]) == image.AptSource("http://m.example/debian", "trixie")
    assert image.parse_apt_sources(["deb https://packages.cloud.google.com/apt cloud-sdk main"]) is None


def test_image_tag_changes_only_when_the_trainer_changes(tmp_path):
    copy = tmp_path / "workspace"
    shutil.copytree(WORKSPACE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = image.trainer_hash(copy)
    (copy / "simtrainer" / "__pycache__").mkdir(exist_ok=True)
    (copy / "simtrainer" / "__pycache__" / "x.pyc").write_bytes(b"junk")
    assert image.trainer_hash(copy) == before
    (copy / "simtrainer" / "schedule.py").write_text("# changed\n")
    assert image.trainer_hash(copy) != before


def test_a_node_sshd_shows_its_own_counters_tree_at_the_real_sysfs_path(tmp_path):
    from testbed.daemons import NodePaths, sshd_command, sshd_config_text

    paths = NodePaths(tmp_path / "node1", tmp_path / "run")
    plain = sshd_command(paths)
    assert plain[0] == "/usr/sbin/sshd" and "-D" in plain
    wrapped = sshd_command(paths, tmp_path / "node-sys" / "node1")
    assert wrapped[:4] == ["unshare", "--mount", "--propagation", "private"]
    script = wrapped[-1]
    assert "mount -t tmpfs" in script and " /sys/class && " in script
    assert f"ln -s {tmp_path}/node-sys/node1/infiniband /sys/class/infiniband" in script
    assert script.endswith(" ".join(plain))
    config = sshd_config_text("127.0.0.3", paths, tmp_path / "keys", "unix:///x.sock", tmp_path / "ns1")
    assert f"CVS_SIM_NODE_SYS={tmp_path}/ns1" in config
