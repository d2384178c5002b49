"""SlurmHosts runs a broadcast as one step: against an ``srun`` stand-in (tests/slurm_fakes.py) that
runs the real task program once per node and merges the tasks' output, so the harness side (one
call, per-node results, step failures) is pinned without Slurm. tests/integration/slurm runs the
same against real slurmd's."""

from __future__ import annotations

import os
import time

import pytest

from cvs_tasks.remote.slurm import Allocation, SlurmClient, SlurmHosts
from cvs_tasks.remote.slurm_cmd import SlurmNode
from tests.slurm_fakes import install_fake_srun, srun_calls


@pytest.fixture
def fake_srun(tmp_path, monkeypatch):
    log = tmp_path / "srun.calls"
    install_fake_srun(tmp_path / "bin", log, monkeypatch)
    return lambda: srun_calls(log)


def hosts(count: int) -> SlurmHosts:
    nodes = tuple(SlurmNode(f"gpu{i:02d}", f"10.0.0.{i + 1}", "ALLOCATED") for i in range(count))
    return SlurmHosts(SlurmClient(), Allocation("9", nodes, owned=True))


def test_eight_distinct_commands_are_one_srun_call_with_each_nodes_own_result(fake_srun):
    results = hosts(8).run([f"echo rank {i}; cat; exit {i % 3}" for i in range(8)], timeout=30, stdin="in\n")
    assert [(r.exit_code, r.stdout) for r in results] == [(i % 3, f"rank {i}\nin\n") for i in range(8)]
    assert results[1].error == "node gpu01 (10.0.0.2): exit status 1: in"
    (call,) = fake_srun()
    assert "--nodes=8" in call and "--nodelist=" + ",".join(f"gpu{i:02d}" for i in range(8)) in call


def test_put_and_a_subset_go_through_one_step_too(fake_srun, tmp_path):
    target = tmp_path / "out" / "file"
    view = hosts(4).subset([2])
    assert [r.ok for r in view.put(b"secret\n", str(target), 0o600, timeout=30)] == [True]
    assert target.read_bytes() == b"secret\n" and oct(target.stat().st_mode & 0o777) == "0o600"
    assert [c for c in fake_srun()[0] if c.startswith(("--nodes", "--nodelist"))] == ["--nodes=1", "--nodelist=gpu02"]


def test_a_task_that_never_reports_is_its_nodes_error_and_the_others_keep_theirs(fake_srun, monkeypatch):
    monkeypatch.setenv("FAKE_SRUN_MODE", "kill:gpu01")
    results = hosts(3).run("echo fine", timeout=30)
    assert [r.ok for r in results] == [True, False, True] and results[2].stdout == "fine\n"
    assert results[1].exit_code is None
    assert results[1].error == ("node gpu01 (10.0.0.2): its task in Slurm job 9's step ended without reporting "
                                "(srun exit 137: srun: error: gpu01: task 1: Killed)")


def test_a_step_slurm_refuses_is_every_nodes_allocation_error(fake_srun, monkeypatch):
    monkeypatch.setenv("FAKE_SRUN_MODE", "no-step")
    results = hosts(2).run("true", timeout=30)
    assert [r.exit_code for r in results] == [None, None]
    assert results[0].error == ("node gpu00 (10.0.0.1): Slurm job 9: the allocation cannot start a step: "
                                "Job/step already completing or completed")


def test_the_task_stderr_carries_no_srun_lines(fake_srun):
    (result,) = hosts(1).run("echo bad >&2; exit 4", timeout=30)
    assert result.exit_code == 4 and result.stderr == "bad\n"


def test_each_nodes_own_file_is_written_in_one_step(fake_srun, tmp_path):
    files = [(f"#!/bin/sh\necho node {i}\n".encode() * (i + 1), str(tmp_path / "scripts" / f"node{i}.sh"))
             for i in range(3)]
    results = hosts(3).put_each(files, 0o700, timeout=30)
    assert [r.ok for r in results] == [True, True, True] and len(fake_srun()) == 1
    for data, path in files:
        assert open(path, "rb").read() == data and oct(os.stat(path).st_mode & 0o777) == "0o700"


def test_a_job_whose_commands_overflow_one_argument_takes_them_from_stdin(fake_srun, tmp_path):
    padding = "#" + "x" * 40_000  # 4 nodes x 40 KB: more than Linux takes in one argv string
    commands = [f"echo $SLURMD_NODENAME > {tmp_path}/{i}; exit {i}  {padding}" for i in range(4)]
    proc = hosts(4).spread(commands, tmp_path / "srun.out")
    assert proc.wait(timeout=60) == 3
    assert [(tmp_path / str(i)).read_text() for i in range(4)] == [f"gpu{i:02d}\n" for i in range(4)]
    (call,) = fake_srun()
    assert "--input=all" in call and sum(len(a) for a in call) < 10_000


def test_a_job_that_fits_keeps_its_commands_in_argv(fake_srun, tmp_path):
    proc = hosts(2).spread([f"echo {i} > {tmp_path}/{i}" for i in range(2)], tmp_path / "srun.out")
    assert proc.wait(timeout=60) == 0 and (tmp_path / "1").read_text() == "1\n"
    assert "--input=all" not in fake_srun()[0] and "gpu01) echo 1" in fake_srun()[0][-1]


def test_a_node_whose_task_cannot_be_launched_fails_alone_and_the_others_run_again(fake_srun, monkeypatch):
    monkeypatch.setenv("FAKE_SRUN_MODE", "launch-fail:gpu01")
    results = hosts(3).run(["echo zero", "echo one", "echo two; exit 2"], timeout=30)
    assert [(r.exit_code, r.stdout) for r in results] == [(0, "zero\n"), (None, ""), (2, "two\n")]
    assert results[1].error == ("node gpu01 (10.0.0.2): Slurm could not start its task in job 9's step: Task "
                                "launch for StepId=9.3 failed on node gpu01: Communication connection failure")
    first, second = fake_srun()
    assert "--nodelist=gpu00,gpu01,gpu02" in first and "--nodelist=gpu00,gpu02" in second


def test_a_broadcast_that_times_out_cancels_its_own_step_by_name(fake_srun, tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"  # squeue lists every step srun started, scancel logs what it is asked
    (bin_dir / "squeue").write_text(
        "#!/bin/sh\nn=0\ngrep -o -- '--job-name=[^\"]*' \"$FAKE_SRUN_LOG\" | while read -r a; do n=$((n + 1)); "
        "echo \"9.$n ${a#--job-name=}\"; done\necho '9.77 someone-else'\n")
    (bin_dir / "scancel").write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/scancel.calls\n")
    for tool in ("squeue", "scancel"):
        (bin_dir / tool).chmod(0o755)
    started = time.monotonic()
    results = hosts(2).run("sleep 30", timeout=2)
    assert time.monotonic() - started < 25
    assert [r.error for r in results] == [f"node gpu0{i} (10.0.0.{i + 1}): command timed out after 2s" for i in (0, 1)]
    (call,) = fake_srun()
    assert "--time=2" in call and call[-1] == "2"  # Slurm's limit and the tasks' own bound
    assert (tmp_path / "scancel.calls").read_text() == "9.1\n"
