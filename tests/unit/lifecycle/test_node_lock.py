"""The log-folder lock at launch, through a real Session whose node answers from a script: a live
holder refuses the launch (ERROR, exit 3 via InfraError) naming it; a stale one is taken over and
the console says whose it was; each job refreshes the lock in its folder-preparing command."""

from __future__ import annotations

import re
import subprocess

import pytest

from cvs_tasks.jobs.nodelock import LockHolder
from cvs_tasks.lifecycle.flow import run_stage
from cvs_tasks.lifecycle.node_folders import this_host
from tests.unit.lifecycle.test_lifecycle_rules import new_session

LAUNCH = re.compile(r"\.cvs-run.*\.cvs-lock")


@pytest.fixture
def run(tmp_path):
    session, hosts = new_session(tmp_path / "reports")
    said: list[str] = []
    session.listener = lambda message: said.append(str(getattr(message, "text", message)))
    yield session, hosts, said
    session.close()


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_live_holder_refuses_the_launch_and_is_named(run):
    session, hosts, _ = run
    other = LockHolder("20261203-090000-beef", "bob", "head02", 4242, 1764752400)
    hosts.expect("true")
    hosts.expect(LAUNCH, stdout=f"cvs-lock held 30\n{other.to_json()}\n")
    [record] = run_stage(session, "launch_container")
    assert record.status == "ERROR"
    assert "is in use by run 20261203-090000-beef of bob (harness on head02, pid 4242" in record.reason
    assert "{run-id}" in record.reason and "invoke cleanup" in record.reason
    hosts.assert_done()


def test_a_stale_holder_is_taken_over_with_a_warning(run):
    session, hosts, said = run
    stale = LockHolder("20261203-090000-dead", "bob", this_host(), dead_pid(), 1764752400)
    hosts.expect("true")
    hosts.expect(LAUNCH, stdout=f"cvs-lock held 30\n{stale.to_json()}\n")
    hosts.expect(re.compile(r"rm -rf -- \"\$l\"; fi; l="), stdout="cvs-lock taken\n")  # if it still reads so
    hosts.expect_put(f"{session.node_run_dir}/hf_token")
    hosts.expect(re.compile(r"@@cvs-check fp_asic"))
    [record] = run_stage(session, "launch_container")
    assert record.status == "PASS", record.reason
    assert any("took over the stale lock of run 20261203-090000-dead" in line and "is gone" in line
               for line in said), said


def test_a_node_that_gives_no_lock_answer_is_an_error(run):
    session, hosts, _ = run
    hosts.expect("true")
    hosts.expect(LAUNCH, stdout="")
    [record] = run_stage(session, "launch_container")
    assert record.status == "ERROR" and "did not answer the lock" in record.reason
