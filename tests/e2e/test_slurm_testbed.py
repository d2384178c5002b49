"""`invoke all` where the nodes come from a real Slurm cluster (munged, slurmctld, a slurmd per
testbed node): allocation, one srun step per job, docker and no-container runs, and the faults a
scheduler adds — a cancelled allocation, a drained node, Ctrl-C — each named, each leaving nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from cvs_tasks.run import combo_dir
from tests.e2e.conftest import REPO, edited_config, run_invoke
from tests.e2e.test_lifecycle_testbed import containers_on, trainer_processes
from tests.reliability.helpers import RunningInvoke, spy

pytestmark = [pytest.mark.testbed, pytest.mark.e2e, pytest.mark.slurm]

CONFIGS = REPO / "configs" / "testbed"


class SlurmTestbed:
    def __init__(self, testbed, cluster_file: Path):
        self.testbed = testbed
        self.cluster_file = cluster_file
        self.env = {**os.environ, "SLURM_CONF": json.loads(cluster_file.read_text())["scheduler"]["slurm_conf"]}

    def slurm(self, *argv: str) -> str:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=60, env=self.env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def resume(self) -> None:
        """Put drained testbed nodes back (an idle node answers 'invalid state': fine)."""
        for node in ("cvs-n0", "cvs-n1"):
            subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], capture_output=True,
                           timeout=60, env=self.env)

    def jobs(self) -> list[str]:
        return self.slurm("squeue", "-h", "-o", "%i %j %T").splitlines()


@pytest.fixture
def slurm_testbed(testbed_cluster):
    """The session's testbed with a Slurm cluster over its nodes; after each test: no allocation,
    no container, no simulated-trainer process left."""
    from testbed import cluster

    info = cluster.up(nodes=len(testbed_cluster.nodes), state_dir=testbed_cluster.state_dir, scheduler="slurm",
                      log=lambda _: None)
    bed = SlurmTestbed(testbed_cluster, info.slurm_cluster_file)
    yield bed
    assert bed.jobs() == [], "Slurm allocations left"
    for node in testbed_cluster.nodes:
        assert containers_on(node) == [], f"containers left on {node.address}"
    assert trainer_processes() == []


def slurm_cluster(tmp_path: Path, bed: SlurmTestbed, **scheduler) -> Path:
    body = json.loads(bed.cluster_file.read_text())
    body["scheduler"].update(scheduler)
    path = tmp_path / "cluster-slurm.json"
    path.write_text(json.dumps(body))
    return path


def passed_everywhere(res, config: Path) -> None:
    assert res.code == 0, res.out + res.err
    assert res.results()["verdict"] == "PASS"
    manifest = json.loads((res.run_dir / "run.json").read_text())
    assert manifest["slurm"]["owned"] and manifest["slurm"]["released"]
    assert manifest["hosts"] == ["cvs-n0", "cvs-n1"]
    for combo in json.loads(config.read_text())["sweep"]["runs"]:
        training = res.record("training", combo)
        assert training["status"] == "PASS" and len(training["nodes"]) == 2
        assert (res.run_dir / "logs" / "training" / combo_dir(combo) / "srun.log").is_file()
    assert any("released" in note for note in res.record("teardown")["data"]["notes"])


@pytest.mark.parametrize("config", ["sim_megatron_distributed.json", "sim_primus_distributed.json"])
def test_all_passes_on_a_slurm_allocation_with_docker(config, slurm_testbed, reports):
    res = run_invoke("all", "--config", str(CONFIGS / config), "--cluster", str(slurm_testbed.cluster_file),
                     reports=reports)
    passed_everywhere(res, CONFIGS / config)
    if "primus" in config:
        assert res.record("checkpoint")["status"] == "PASS"


@pytest.mark.parametrize("config", ["sim_megatron_distributed.json", "sim_primus_distributed.json"])
def test_all_passes_on_a_slurm_allocation_without_a_container(config, slurm_testbed, reports, tmp_path):
    def on_the_node(cfg):
        cfg["container"]["runtime"] = {"name": "host", "args": {}}
        cfg["train_params"]["megatron_root"] = "{cvs-root}/testbed/trainer/workspace/Megatron-LM"
        cfg["train_params"]["primus_root"] = "{cvs-root}/testbed/trainer/workspace/Primus"
        cfg["train_params"]["nic_type"] = "ainic"  # no Broadcom library to copy on this machine

    cfg = edited_config(CONFIGS / config, tmp_path, on_the_node)
    cluster = slurm_cluster(tmp_path, slurm_testbed, container="none")
    res = run_invoke("all", "--config", str(cfg), "--cluster", str(cluster), reports=reports)
    passed_everywhere(res, cfg)


def test_the_dry_run_prints_the_salloc_and_srun_lines(slurm_testbed, reports):
    res = run_invoke("all", "--dry-run", "--config", str(CONFIGS / "sim_megatron_distributed.json"),
                     "--cluster", str(slurm_testbed.cluster_file), reports=reports)
    assert res.code == 0, res.out + res.err
    assert "salloc --no-shell --nodes=2 --ntasks-per-node=1 --exclusive --job-name=cvs-tasks-" in res.out
    assert "srun --jobid=<allocation> --overlap --nodes=2 --ntasks-per-node=1" in res.out
    assert slurm_testbed.jobs() == []


def test_a_drained_node_is_refused_before_anything_is_launched(slurm_testbed, reports, tmp_path):
    cluster = slurm_cluster(tmp_path, slurm_testbed, nodelist="cvs-n[0-1]")
    slurm_testbed.slurm("scontrol", "update", "NodeName=cvs-n1", "State=DRAIN", "Reason=cvs e2e: flaky link")
    try:
        res = run_invoke("all", "--config", str(CONFIGS / "sim_megatron_distributed.json"), "--cluster",
                         str(cluster), reports=reports)
    finally:
        slurm_testbed.resume()
    assert res.code == 3, res.out + res.err
    launch = res.record("launch_container")
    assert launch["status"] == "ERROR" and "cvs-n1 is IDLE+DRAIN (cvs e2e: flaky link" in launch["reason"]
    assert res.record("smoke")["status"] == "SKIPPED"


def long_second_combo(cfg) -> None:
    first, second = cfg["sweep"]["runs"]
    cfg["sweep"]["combinations"][first]["training_iterations"] = "5"
    cfg["sweep"]["combinations"][second]["training_iterations"] = "60"
    cfg["container"]["env"]["SIM_TIME_SCALE"] = "0.25"
    cfg["loss_curve"]["milestone_steps"] = [2, 5]


def mid_training(reports: Path, combo: str):
    """Fires once this run's copy of a node log of ``combo`` shows iteration 3 (the node-side log
    folder may still hold an earlier run's log)."""
    return spy(reports, r"iteration\s+3/", glob=f"*/logs/training/{combo_dir(combo)}/out-node*/training.log")


def test_a_cancelled_allocation_is_named_and_nothing_is_left(slurm_testbed, reports, tmp_path):
    cfg = edited_config(CONFIGS / "sim_megatron_distributed.json", tmp_path, long_second_combo)
    second = json.loads(cfg.read_text())["sweep"]["runs"][1]
    running = mid_training(reports, second)
    with RunningInvoke("all", "--config", str(cfg), "--cluster", str(slurm_testbed.cluster_file),
                       reports=reports) as run:
        running.wait_seen(300)
        job_id = json.loads((reports / "latest" / "run.json").read_text())["slurm"]["job_id"]
        slurm_testbed.slurm("scancel", job_id)
        res = run.wait(300)
    assert res.code == 3, res.out + res.err  # the nodes were taken away: infrastructure, not a gate
    training = res.record("training", second)
    assert training["status"] == "ERROR"
    assert training["reason"].startswith("Slurm: the step was cancelled (scancel)"), training["reason"]
    assert res.record("teardown")["status"] == "PASS"


def test_ctrl_c_tears_down_and_releases_the_allocation(slurm_testbed, reports, tmp_path):
    cfg = edited_config(CONFIGS / "sim_megatron_distributed.json", tmp_path, long_second_combo)
    second = json.loads(cfg.read_text())["sweep"]["runs"][1]
    running = mid_training(reports, second)
    with RunningInvoke("all", "--config", str(cfg), "--cluster", str(slurm_testbed.cluster_file),
                       reports=reports) as run:
        running.wait_seen(300)
        run.signal(signal.SIGINT)
        res = run.wait(300)
    assert res.code == 130, res.out + res.err
    manifest = json.loads((res.run_dir / "run.json").read_text())
    assert manifest["slurm"]["released"] and manifest["interrupted"]
    assert res.record("teardown")["status"] == "PASS"


def test_the_node_a_fault_names_is_drained_only_when_asked(slurm_testbed, reports, tmp_path):
    src = CONFIGS / "sim_megatron_distributed.json"
    runs = json.loads(src.read_text())["sweep"]["runs"]
    faulty = runs[-1]

    def edit(cfg):
        cfg["container"]["env"].update(SIM_FAULT="gpu_fault@4", SIM_FAULT_PRECISION=faulty.split("PRECISION=")[1])

    cfg = edited_config(src, tmp_path, edit)
    cluster = slurm_cluster(tmp_path, slurm_testbed, drain_failed=True)
    try:
        res = run_invoke("all", "--config", str(cfg), "--cluster", str(cluster), reports=reports)
        assert res.code == 1, res.out + res.err
        slurm = json.loads((res.run_dir / "run.json").read_text())["slurm"]
        [(node, why)] = slurm["bad_nodes"].items()
        assert why == f"test_training[{faulty}]: gpu_fault"
        assert slurm["drained"] == [node]
        assert f"scontrol update NodeName={node} State=DRAIN Reason='cvs-tasks: {why}'" in res.out
        state = slurm_testbed.slurm("sinfo", "-h", "-N", "-n", node, "-o", "%t|%E")
        assert state.startswith("drain") and f"cvs-tasks: {why}" in state
    finally:
        slurm_testbed.resume()


def test_cleanup_after_a_killed_harness_empties_and_cancels_its_allocation(slurm_testbed, reports, tmp_path):
    cfg = edited_config(CONFIGS / "sim_megatron_distributed.json", tmp_path, long_second_combo)
    second = json.loads(cfg.read_text())["sweep"]["runs"][1]
    running = mid_training(reports, second)
    with RunningInvoke("all", "--config", str(cfg), "--cluster", str(slurm_testbed.cluster_file),
                       reports=reports) as run:
        running.wait_seen(300)
        run.signal(signal.SIGKILL)
        run.wait(60)
    job_id = json.loads((reports / "latest" / "run.json").read_text())["slurm"]["job_id"]
    assert any(line.startswith(f"{job_id} ") for line in slurm_testbed.jobs())
    assert any(containers_on(node) for node in slurm_testbed.testbed.nodes)
    res = run_invoke("cleanup", "--cluster", str(slurm_testbed.cluster_file), "--config", str(cfg), reports=reports)
    assert res.code == 0, res.out + res.err
    assert f"cancelled Slurm job {job_id}" in res.out and "container cvs_sim_megatron_distributed" in res.out


def test_steps_per_combo_with_the_docker_runtime_are_a_small_constant(slurm_testbed, reports, tmp_path):
    """The step count of README "Running on a Slurm cluster", here with containers: one combo, the
    docker runtime, an `srun` first on PATH that logs each call (tests/e2e/test_slurm_steps.py)."""
    import shutil
    from collections import Counter

    from tests.e2e.test_slurm_steps import COUNTING_SRUN, MOST_STEPS

    def one_combo(cfg):
        combo = cfg["sweep"]["runs"][0]
        cfg["sweep"] = {"combinations": {combo: cfg["sweep"]["combinations"][combo]}, "runs": [combo]}

    cfg = edited_config(CONFIGS / "sim_megatron_distributed.json", tmp_path, one_combo)
    thresholds = tmp_path / json.loads(cfg.read_text())["threshold_json"]
    combo = json.loads(cfg.read_text())["sweep"]["runs"][0]
    thresholds.write_text(json.dumps({combo: json.loads(thresholds.read_text())[combo]}))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(COUNTING_SRUN.replace("@SRUN@", shutil.which("srun")))
    (bin_dir / "srun").chmod(0o755)
    calls = tmp_path / "srun.calls"
    res = run_invoke("all", "--config", str(cfg), "--cluster", str(slurm_testbed.cluster_file), reports=reports,
                     env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "SRUN_COUNT_LOG": str(calls)})
    passed_everywhere(res, cfg)
    steps = Counter(line.split()[0] for line in calls.read_text().splitlines())
    print(f"job steps of one combo with docker on 2 nodes: {sum(steps.values())} {dict(steps)}")
    assert sum(steps.values()) <= MOST_STEPS and steps["other"] == 0
    assert steps["follow"] == 2 and steps["spread"] == 2  # smoke and the combo: a follower step and a job step each
