"""Job steps per combo on Slurm are a small constant (#25): a whole `invoke all` of one combo on a
local Slurm cluster of its own (munged, slurmctld, a slurmd per node, the host runtime on every
node), with an `srun` first on PATH that logs each call before it runs the real one. The count is
the same at 2 and 16 nodes (64 in the scale tier) and for a job training 10 times longer, and a
few dozen at most: broadcasts are one step each, the followers one step per job, the job one."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO, run_invoke

pytestmark = [pytest.mark.testbed, pytest.mark.e2e, pytest.mark.slurm]

CTLD_PORT = 18817
FIRST_PORT = 18901  # to 18964: below the ephemeral ports, apart from the other testbeds
COMBO = "MBS=1,GBS=512,PRECISION=BF16"  # GBS a multiple of MBS x DP up to 64 nodes x 8 GPUs
MOST_STEPS = 36  # "a few dozen at most"; 19 measured (README "Running on a Slurm cluster")

COUNTING_SRUN = r"""#!/bin/bash
# cvs-tasks test: log what kind of step this is, then run the real srun
kind=other
case "$*" in
  *cvs-spread*|*'"$SLURMD_NODENAME" in'*) kind=spread ;;  # the job: its commands on stdin, or a case in argv
  *CVS-BUNDLE*) kind=broadcast ;;
  *CVS-FOLLOW*) kind=follow ;;
esac
nodes=other
for a in "$@"; do case $a in --nodes=*) nodes=${a#--nodes=} ;; esac; done
echo "$kind $nodes" >> "$SRUN_COUNT_LOG"
exec @SRUN@ "$@"
"""


class Cluster:
    """A Slurm cluster of ``count`` nodes on 127.0.7.x, ports of its own; started once per size."""

    def __init__(self):
        self.root: Path | None = None
        self.count = 0
        self.conf: Path | None = None

    def sized(self, count: int) -> Path:
        from testbed import slurm

        if count != self.count:
            self.down()
            self.root = Path(tempfile.mkdtemp(prefix="cvs-slurm-steps-"))
            self.root.chmod(0o755)  # the munge user must reach munged's socket
            addresses = [f"127.0.7.{10 + i}" for i in range(count)]
            self.conf = slurm.up(self.root, addresses, [f"unix:///nonexistent/{i}.sock" for i in range(count)],
                                 ctld_port=CTLD_PORT, first_port=FIRST_PORT, log=lambda _: None)
            self.count = count
        return self.conf

    def down(self) -> None:
        from testbed import slurm

        if self.root is not None:
            slurm.down(self.root)
            shutil.rmtree(self.root, ignore_errors=True)
            self.root, self.count = None, 0


@pytest.fixture(scope="module")
def cluster():
    from testbed import slurm

    problems = slurm.check_prerequisites() + ([] if os.geteuid() == 0 else ["needs root"])
    if problems:
        pytest.fail("Slurm prerequisites missing:\n  " + "\n  ".join(problems), pytrace=False)
    bed = Cluster()
    try:
        yield bed
    finally:
        bed.down()


def suite(tmp_path: Path, iterations: int) -> Path:
    """The distributed simulated-trainer suite on the nodes themselves, one combo, paths of its own."""
    cfg = json.loads((REPO / "configs" / "testbed" / "sim_megatron_distributed.json").read_text())
    cfg["container"]["runtime"] = {"name": "host", "args": {}}
    cfg["train_params"].update(megatron_root="{cvs-root}/testbed/trainer/workspace/Megatron-LM",
                               nic_type="ainic", training_iterations=str(iterations))
    shared = tmp_path / "shared"
    cfg["paths"].update(log_dir=f"{shared}/logs/{{run-id}}", scripts_dir=f"{shared}/scripts",
                        data_cache_dir=f"{shared}/cache")
    cfg["sweep"] = {"combinations": {COMBO: {"training_iterations": str(iterations)}}, "runs": [COMBO]}
    cfg["smoke"]["global_batch_size"] = ""  # derived from the node count
    # 64 simulated trainers share this machine's 2 cores with whatever else runs: generous clocks
    cfg["container"]["env"]["SIM_NCCL_TIMEOUT_S"] = "300"
    cfg["watch"].update(stall_timeout_s=300, startup_timeout_s=300)
    thresholds = json.loads((REPO / "thresholds" / "testbed" / "sim_megatron_distributed_threshold.json").read_text())
    cell = dict(thresholds["MBS=2,GBS=32,PRECISION=BF16"])
    # the simulated throughput per GPU falls with the node count at a fixed global batch: gates that hold at 64 nodes
    cell["training.tokens_per_gpu"] = {"kind": "min_tok_s", "value": 1000}
    cell["training.throughput_per_gpu"] = {"kind": "min", "value": 100}
    (tmp_path / "thresholds.json").write_text(json.dumps({COMBO: cell}))
    cfg["threshold_json"] = "thresholds.json"
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(cfg, indent=2))
    return path


def count_steps(cluster: Cluster, tmp_path: Path, nodes: int, iterations: int) -> Counter:
    """Run `invoke all` of one combo on ``nodes`` Slurm nodes; PASS expected; the srun calls by kind."""
    conf = cluster.sized(nodes)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "srun").write_text(COUNTING_SRUN.replace("@SRUN@", shutil.which("srun")))
    (bin_dir / "srun").chmod(0o755)
    calls = tmp_path / "srun.calls"
    cluster_file = tmp_path / "cluster.json"
    cluster_file.write_text(json.dumps({"scheduler": {"name": "slurm", "nodes": nodes, "partition": "cvs",
                                                      "container": "none", "slurm_conf": str(conf)}}))
    reports = tmp_path / "reports"
    reports.mkdir()
    res = run_invoke("all", "--config", str(suite(tmp_path, iterations)), "--cluster", str(cluster_file),
                     reports=reports, timeout=1500,
                     env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "SRUN_COUNT_LOG": str(calls)})
    assert res.code == 0, res.out[-3000:] + res.err[-3000:]
    assert res.results()["verdict"] == "PASS"
    training = res.record("training", COMBO)
    assert training["status"] == "PASS" and len(training["nodes"]) == nodes
    assert (res.run_dir / "report.html").is_file()
    lines = calls.read_text().splitlines()
    assert all(line.split()[1] == str(nodes) for line in lines), lines  # every step spans every node
    return Counter(line.split()[0] for line in lines)


def test_steps_per_combo_are_the_same_at_2_and_16_nodes_and_for_a_10x_longer_job(cluster, tmp_path):
    short2 = count_steps(cluster, tmp_path / "short2", 2, 20)
    long2 = count_steps(cluster, tmp_path / "long2", 2, 200)
    short16 = count_steps(cluster, tmp_path / "short16", 16, 20)
    assert short2 == long2 == short16, (short2, long2, short16)
    assert sum(short2.values()) <= MOST_STEPS and short2["other"] == 0
    assert short2["follow"] == 2 and short2["spread"] == 2  # smoke and the combo: a follower step and a job step each


@pytest.mark.scale
def test_a_whole_run_on_64_slurm_nodes_passes_with_the_same_steps(cluster, tmp_path):
    short2 = count_steps(cluster, tmp_path / "short2", 2, 20)
    short64 = count_steps(cluster, tmp_path / "short64", 64, 20)
    long64 = count_steps(cluster, tmp_path / "long64", 64, 200)
    assert short2 == short64 == long64, (short2, short64, long64)
