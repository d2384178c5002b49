"""A broadcast on real Slurm when it times out or a node fails under it. The cluster is this module's
own (three nodes, its own ports and addresses): one test stops a node's slurmd."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest

from cvs_tasks.remote import slurm_cmd as sc
from cvs_tasks.remote.slurm import SlurmClient, SlurmHosts

pytestmark = [pytest.mark.slurm, pytest.mark.testbed]

CTLD_PORT = 28817
FIRST_PORT = 29001
ADDRESSES = ["127.0.9.10", "127.0.9.11", "127.0.9.12"]


@pytest.fixture(scope="module")
def cluster_root():
    from testbed import slurm

    problems = slurm.check_prerequisites() + ([] if os.geteuid() == 0 else ["needs root"])
    if problems:
        pytest.fail("Slurm prerequisites missing:\n  " + "\n  ".join(problems), pytrace=False)
    root = Path(tempfile.mkdtemp(prefix="cvs-slurm-fail-"))
    root.chmod(0o755)  # the munge user must reach munged's socket below it
    try:
        slurm.up(root, ADDRESSES, ["unix:///nonexistent/docker.sock"] * 3, ctld_port=CTLD_PORT,
                 first_port=FIRST_PORT, log=lambda _: None)
        yield root
    finally:
        slurm.down(root)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def allocated(cluster_root):
    client = SlurmClient(str(cluster_root / "slurm.conf"))
    alloc = client.request(sc.AllocationRequest(nodes=3, job_name="cvs-fail", time="00:10:00", wait_s=30))
    yield SlurmHosts(client, alloc), client, alloc.job_id
    client.release(alloc.job_id)


def stepds(job_id: str, root: Path) -> list[int]:
    """This cluster's slurmstepd processes of the job (their environment names the cluster's folder)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if cmdline.startswith(b"slurmstepd: [%s." % job_id.encode()) and str(root).encode() in environ:
            found.append(int(pid))
    return found


def processes_running(marker: str) -> list[int]:
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                pids.append(int(pid))
        except OSError:
            continue
    return pids


def wait_until(check, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.25)
    return check()


def test_a_broadcast_that_times_out_leaves_no_step_or_task_behind(allocated, cluster_root, tmp_path):
    hosts, client, job = allocated
    started = time.monotonic()
    results = hosts.run(f"touch {tmp_path}/$SLURMD_NODENAME; exec sleep 317", timeout=3)
    assert [r.error for r in results] == [f"node cvs-n{i} ({ADDRESSES[i]}): command timed out after 3s"
                                          for i in range(3)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cvs-n0", "cvs-n1", "cvs-n2"]  # the commands ran

    def nothing_left() -> bool:
        steps = client.run(sc.steps_command(job)).stdout.split()
        return not steps and not stepds(job, cluster_root) and not processes_running("sleep 317")

    assert wait_until(nothing_left, 30), "the timed-out broadcast's step outlived it"
    assert time.monotonic() - started < 40


def test_a_node_whose_slurmd_died_fails_alone_and_a_timeout_then_leaves_no_task(allocated, cluster_root, tmp_path):
    hosts, client, job = allocated
    state = json.loads((cluster_root / "state.json").read_text())
    os.kill(state["slurmd"]["cvs-n2"], signal.SIGKILL)  # our own slurmd; slurmctld does not know yet
    results = hosts.run([f"echo ran >> {tmp_path}/n{i}; echo node {i}" for i in range(3)], timeout=120)
    assert [(r.exit_code, r.stdout) for r in results[:2]] == [(0, "node 0\n"), (0, "node 1\n")]
    assert results[2].exit_code is None and results[2].error.startswith(
        f"node cvs-n2 ({ADDRESSES[2]}): Slurm could not start its task in job {job}'s step: Task launch for "
        f"StepId={job}.")
    assert "failed on node cvs-n2: " in results[2].error
    assert [(tmp_path / f"n{i}").read_text() for i in range(2)] == ["ran\n", "ran\n"]  # once: the aborted step ran none
    assert not (tmp_path / "n2").exists()

    # srun waits for the dead node's launch; killed at 3 s, its tasks on the live nodes wait for a stdin
    # that never comes: they end themselves (and the step is cancelled), none is left waiting
    results = hosts.run("echo never", timeout=3)
    assert all(r.exit_code is None for r in results)
    assert wait_until(lambda: not processes_running("cvs-broadcast\x003\x00"), 30), "a task outlived its broadcast"
    # slurmstepd's of the aborted step abandon their IO 60 s after the abort (Slurm's own wait), then end
    assert wait_until(lambda: not stepds(job, cluster_root), 90), "slurmstepd's outlived the broadcasts"
