"""The Slurm transport against a real slurmctld/slurmd pair: allocate, run steps, read, release."""

from __future__ import annotations

import os
import time

import pytest

from cvs_tasks.errors import BadInput, InfraError
from cvs_tasks.remote import slurm_cmd as sc
from cvs_tasks.remote.slurm import SlurmClient, SlurmHosts

pytestmark = [pytest.mark.slurm, pytest.mark.testbed]


@pytest.fixture
def client(slurm_conf):
    return SlurmClient(str(slurm_conf))


@pytest.fixture
def allocation(client):
    alloc = client.request(sc.AllocationRequest(nodes=2, job_name="cvs-test", time="00:10:00", wait_s=30))
    yield alloc
    client.release(alloc.job_id)


def test_request_resolves_names_and_addresses_and_release_ends_the_job(client, allocation):
    assert [n.name for n in allocation.nodes] == ["cvs-n0", "cvs-n1"]
    assert [n.address for n in allocation.nodes] == ["127.0.0.60", "127.0.0.61"] and allocation.owned
    assert client.job(allocation.job_id).running
    assert client.release(allocation.job_id)
    assert client.job(allocation.job_id).ended


def test_steps_run_on_their_own_node_with_stdin_and_the_node_environment(client, allocation):
    hosts = SlurmHosts(client, allocation)
    results = hosts.run(["echo $SLURMD_NODENAME $DOCKER_HOST; cat", "echo $SLURMD_NODENAME; exit 4"],
                        timeout=30, stdin="from-stdin\n")
    assert results[0].ok and results[0].stdout == "cvs-n0 unix:///nonexistent/n0.sock\nfrom-stdin\n"
    assert results[1].exit_code == 4 and results[1].stdout == "cvs-n1\n" and results[1].stderr == ""
    assert results[1].error.startswith("node cvs-n1 (127.0.0.61): exit status 4")


def test_put_and_incremental_read_go_through_steps(client, allocation, tmp_path):
    hosts = SlurmHosts(client, allocation)
    path = str(tmp_path / "log.txt")
    assert all(r.ok for r in hosts.subset([0]).put(b"line one\nline two\n", path, 0o600, timeout=30))
    read = hosts.subset([0]).read_from([path], [9], 1 << 20, timeout=30)[0]
    assert (read.data, read.offset, read.size, read.error) == ("line two\n", 18, 18, None)


def test_a_step_that_outlives_its_timeout_is_a_node_error(client, allocation):
    started = time.monotonic()
    result = SlurmHosts(client, allocation).subset([1]).run("sleep 60", timeout=1)[0]
    assert result.exit_code is None and result.error == "node cvs-n1 (127.0.0.61): command timed out after 1s"
    assert time.monotonic() - started < 20


def test_spread_runs_one_task_per_node_in_one_step(client, allocation, tmp_path):
    proc = SlurmHosts(client, allocation).spread([f"echo zero > {tmp_path}/0", f"echo one > {tmp_path}/1; exit 3"],
                                                 tmp_path / "srun.out")
    assert proc.wait(timeout=60) == 3
    assert "task 1: Exited with exit code 3" in (tmp_path / "srun.out").read_text()
    assert (tmp_path / "0").read_text() == "zero\n" and (tmp_path / "1").read_text() == "one\n"


def test_after_release_a_step_is_an_allocation_error_not_a_task_exit(client, allocation):
    hosts = SlurmHosts(client, allocation)
    client.release(allocation.job_id)
    result = hosts.run("true", timeout=30)[0]
    assert result.exit_code is None and "Slurm job" in result.error and "allocation" in result.error


def test_attach_refuses_an_ended_job_and_a_wrong_size(client, allocation):
    with pytest.raises(BadInput, match="holds 2 node"):
        client.attach(allocation.job_id, expected=3)
    assert client.attach(allocation.job_id, expected=2).owned is False
    client.release(allocation.job_id)
    with pytest.raises(BadInput, match="not a running allocation"):
        client.attach(allocation.job_id)


def test_a_drained_node_is_refused_before_anything_is_requested(client):
    client.check(["scontrol", "update", "NodeName=cvs-n1", "State=DRAIN", "Reason=cvs test: bad link"], "drain")
    try:
        with pytest.raises(InfraError, match=r"cvs-n1 is IDLE\+DRAIN \(cvs test: bad link \[root@"):
            client.request(sc.AllocationRequest(nodes=2, job_name="cvs-test", nodelist="cvs-n[0-1]", wait_s=5))
        assert client.run(["squeue", "-h"]).stdout.strip() == ""
    finally:
        client.check(["scontrol", "update", "NodeName=cvs-n1", "State=RESUME"], "resume")


def test_an_allocation_that_cannot_start_is_a_bounded_clear_failure(client):
    started = time.monotonic()
    with pytest.raises(InfraError, match="allocation of 3 node"):
        client.request(sc.AllocationRequest(nodes=3, job_name="cvs-test", wait_s=2))
    assert time.monotonic() - started < 30
    assert client.run(["squeue", "-h"]).stdout.strip() == ""


def test_a_step_ended_by_the_time_limit_is_named_as_such(slurm_time_limit_step):
    """Slurm enforces limits in whole minutes and checks them every half minute, so the step was
    started when collection ended and has usually ended by now (`time_limit.py`)."""
    from cvs_tasks.lifecycle.watch import WatchOutcome

    step = slurm_time_limit_step.step
    assert step.process.wait(timeout=240) != 0  # srun's own output says why (below)
    outcome = WatchOutcome("exited", "the job exited with status 143 on 1 node(s)", [], 0, 90.0)
    step.finish(outcome)
    assert step.cause == "the allocation hit its time limit"
    assert outcome.reason == "Slurm: the allocation hit its time limit; the job exited with status 143 on 1 node(s)"



@pytest.fixture
def counted(slurm_conf, allocation, tmp_path, monkeypatch):
    """SlurmHosts on the allocation whose srun calls are counted (a wrapper first on PATH)."""
    import shutil

    wrapper = tmp_path / "bin" / "srun"
    wrapper.parent.mkdir()
    wrapper.write_text(f"#!/bin/sh\necho call >> {tmp_path}/srun.calls\nexec {shutil.which('srun')} \"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")
    hosts = SlurmHosts(SlurmClient(str(slurm_conf)), allocation)

    def calls() -> int:
        path = tmp_path / "srun.calls"
        return len(path.read_text().splitlines()) if path.exists() else 0

    return hosts, calls


def test_a_broadcast_is_one_step_and_each_node_keeps_its_own_result(counted):
    hosts, calls = counted
    results = hosts.run(["head -c 300000 /dev/zero | tr '\\0' a; echo; exit 0", "echo two >&2; exit 6"], timeout=60)
    assert results[0].ok and results[0].stdout == "a" * 300000 + "\n"
    assert (results[1].exit_code, results[1].stderr) == (6, "two\n")
    assert calls() == 1


def test_followers_are_one_step_per_job_and_a_killed_one_comes_back_alone(counted, tmp_path):
    import signal
    import threading

    from cvs_tasks.remote.follow import FollowTarget
    from tests.follow_helpers import FAST, follow_to_end
    from tests.unit.remote.test_remote_slurm_follow import follower_pid

    hosts, calls = counted
    logs = [tmp_path / f"node{i}.log" for i in range(2)]
    exits = [tmp_path / f"node{i}.exit" for i in range(2)]

    def write():
        for k in range(60):
            for log in logs:
                with open(log, "ab") as out:
                    out.write(b"iteration %d %s\n" % (k, b"z" * (k * 97 % 3000)))
            time.sleep(0.05)
        for ex in exits:
            ex.write_text("0\n")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    killed = []

    def kill_node1(_event):
        pid = follower_pid(logs[1]) if not killed and logs[1].exists() and logs[1].stat().st_size > 30_000 else None
        if pid:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    with hosts.follow([FollowTarget(str(log), str(ex)) for log, ex in zip(logs, exits)], FAST) as follow:
        held, seen = follow_to_end(follow, 2, deadline_s=120, on_event=kill_node1)
    writer.join(timeout=60)
    assert seen["exits"] == {0: 0, 1: 0} and killed and len(seen["losses"]) == 1
    assert held[0] == logs[0].read_bytes() and held[1] == logs[1].read_bytes()  # byte-identical copies
    assert calls() == 2  # the job's followers in one step, then node 1's alone
