"""`invoke demo --fault NAME`: each choice is a fault the simulated trainer reads, aimed at one combo
of a copy of the demo config; the shipped config is never edited."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cvs_tasks.config import load_cluster, load_suite
from cvs_tasks.demo import (
    FAULTS,
    SLOWDOWN,
    STALL_TIMEOUT_S,
    fault_named,
    faulted_combo,
    faulted_config,
    write_faulted_config,
)
from cvs_tasks.errors import BadInput

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "configs" / "testbed" / "demo_host.json"
LOCAL = REPO / "cluster" / "localhost.json"
sys.path.insert(0, str(REPO / "testbed" / "trainer" / "workspace"))
from simtrainer.faults import parse_faults  # noqa: E402


def demo_config() -> dict:
    return json.loads(DEMO.read_text())


def test_the_choices_are_the_four_the_readme_names():
    assert [f.name for f in FAULTS] == ["oom", "nan", "hang", "slow-node"]


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_every_choice_is_a_fault_spec_the_simulated_trainer_reads(fault):
    plan = parse_faults(fault.sim_fault)  # raises FaultSpecError on a spec it does not know
    assert plan.faults or plan.slow


def test_an_unknown_fault_is_bad_input_listing_the_choices():
    with pytest.raises(BadInput) as refused:
        fault_named("meltdown")
    assert refused.value.exit_code == 2
    assert "'meltdown' is not a demo fault" in str(refused.value)
    assert "oom, nan, hang, slow-node" in str(refused.value)


def test_the_fault_hits_the_combo_whose_precision_is_not_the_smoke_tests():
    config = demo_config()
    assert config["smoke"]["precision"] == "BF16"
    assert faulted_combo(config) == "MBS=2,GBS=16,PRECISION=FP8"
    copy = faulted_config(config, fault_named("oom"), DEMO.parent)
    env = copy["container"]["env"]
    assert env["SIM_FAULT"] == "oom@5" and env["SIM_FAULT_PRECISION"] == "FP8"
    assert env["SIM_STEP_MS"] == config["container"]["env"]["SIM_STEP_MS"]  # the rest of the env is kept


def test_when_every_combo_shares_the_smoke_precision_the_last_combo_is_hit():
    config = demo_config()
    config["smoke"]["precision"] = "FP8"
    config["sweep"]["runs"] = ["MBS=2,GBS=16,PRECISION=FP8"]
    assert faulted_combo(config) == "MBS=2,GBS=16,PRECISION=FP8"


def test_the_copy_leaves_the_template_data_alone_and_finds_its_thresholds():
    config = demo_config()
    before = json.dumps(config, sort_keys=True)
    copy = faulted_config(config, fault_named("nan"), DEMO.parent)
    assert json.dumps(config, sort_keys=True) == before
    threshold = Path(copy["threshold_json"])
    assert threshold.is_absolute() and threshold.is_file()
    assert copy["container"]["env"]["SIM_FAULT"] == "nan_loss@5,hang@6"


def test_only_the_hang_shortens_the_stall_timeout():
    config = demo_config()
    for fault in FAULTS:
        watch = faulted_config(config, fault, DEMO.parent)["watch"]
        expected = STALL_TIMEOUT_S if fault.name == "hang" else config["watch"]["stall_timeout_s"]
        assert watch["stall_timeout_s"] == expected, fault.name
    assert STALL_TIMEOUT_S < config["watch"]["stall_timeout_s"]


def test_the_slow_node_misses_the_demo_step_time_bound():
    """The slowdown is chosen against the demo's own thresholds: a smaller one would pass."""
    config = demo_config()
    thresholds = json.loads((DEMO.parent / config["threshold_json"]).read_text())
    cell = thresholds[faulted_combo(config)]
    step_ms = float(config["container"]["env"]["SIM_STEP_MS"])
    assert step_ms <= cell["training.elapsed_time_per_iteration"]["value"] < step_ms * SLOWDOWN


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_the_written_copy_loads_as_a_valid_config_and_the_shipped_one_is_unchanged(fault, tmp_path):
    digest = hashlib.sha256(DEMO.read_bytes()).hexdigest()
    written, combo = write_faulted_config(DEMO, fault, tmp_path / "demo-configs")
    assert written.parent == (tmp_path / "demo-configs").resolve() and written.name.startswith("demo_host_")
    suite = load_suite(written, load_cluster(LOCAL))
    assert combo in [c.id for c in suite.combos]
    assert hashlib.sha256(DEMO.read_bytes()).hexdigest() == digest


def test_an_unknown_fault_on_the_command_line_exits_2_before_anything_is_written(tmp_path):
    done = subprocess.run([sys.executable, "-m", "invoke", "-r", str(REPO), "demo", "--fault", "meltdown",
                           "--reports-dir", str(tmp_path / "reports")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "oom, nan, hang, slow-node" in done.stderr
    assert not (tmp_path / "reports").exists()
