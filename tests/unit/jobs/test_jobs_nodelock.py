"""The log-folder lock: answers parsed and staleness judged from plain data, then the lock taken,
refused, refreshed, taken over and released for real in bash on a temporary folder."""

from __future__ import annotations

import os
import subprocess
import threading

import pytest

from cvs_tasks.jobs import nodelock
from cvs_tasks.jobs.nodelock import LockAnswer, LockHolder, parse_answer, stale_reason

A = LockHolder("20261203-101500-aaaa", "alice", "head01", 4242, 1764756900)
B = LockHolder("20261203-101600-bbbb", "bob", "head02", 777, 1764757000)


def bash(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=30)


def held(holder: LockHolder | None = A, age: int | None = 5, text: str | None = None) -> LockAnswer:
    return LockAnswer("held", age, holder.to_json() if text is None else text)


# -- pure ----------------------------------------------------------------------------------------
def test_answers_parse():
    assert parse_answer("cvs-lock taken\n").state == "taken"
    assert parse_answer("cvs-lock none\n").state == "none"
    answer = parse_answer(f"cvs-lock held 12\n{A.to_json()}\n")
    assert (answer.state, answer.age_s, answer.holder) == ("held", 12, A)
    assert parse_answer("cvs-lock held -\n\n") == LockAnswer("held", None, "")
    assert parse_answer("").state == "unknown" and parse_answer("oops\n").state == "unknown"


def test_the_holder_is_named_and_garbage_is_shown_as_such():
    assert held().describe().startswith("run 20261203-101500-aaaa of alice (harness on head01, pid 4242, since 2025")
    shown = held(text="\u202egarbage" * 20).describe()
    assert shown.startswith("an unreadable lock (holder: ") and len(shown) < 200


@pytest.mark.parametrize("text", ["{", "[]", '{"run_id": "../x", "owner": "a", "host": "h", "pid": 1, "started": 1}',
                                  '{"run_id": "r", "owner": "a", "host": "h", "pid": true, "started": 1}',
                                  '{"run_id": "r", "owner": "a", "host": "h", "pid": -1, "started": 1}'])
def test_a_holder_that_does_not_parse_is_none(text):
    assert nodelock.parse_holder(text) is None


def test_stale_when_its_harness_on_this_machine_is_gone_or_it_is_old():
    alive, dead = (lambda pid: True), (lambda pid: False)
    assert "pid 4242 on head01" in stale_reason(held(), this_host="head01", pid_alive=dead)
    assert stale_reason(held(), this_host="head01", pid_alive=alive) is None
    assert stale_reason(held(), this_host="elsewhere", pid_alive=dead) is None  # another machine's pid: unknown
    assert stale_reason(held(text="garbage"), this_host="head01", pid_alive=dead) is None
    assert "older than 24 h" in stale_reason(held(text="garbage", age=nodelock.STALE_AFTER_S + 1),
                                             this_host="x", pid_alive=alive)


def test_a_per_run_log_folder_needs_no_lock():
    assert nodelock.per_run("/tmp/cvs/{run-id}/logs") and not nodelock.per_run("/data/logs")


# -- for real --------------------------------------------------------------------------------------
def test_the_second_run_is_refused_and_named_the_first_refreshes(tmp_path):
    logs = str(tmp_path / "log dir")
    assert parse_answer(bash(nodelock.take_command(logs, A)).stdout).state == "taken"
    answer = parse_answer(bash(nodelock.take_command(logs, B)).stdout)
    assert answer.state == "held" and answer.holder == A and answer.age_s is not None
    later = LockHolder(A.run_id, A.owner, A.host, 5555, A.started + 60)  # the same run's next command
    assert parse_answer(bash(nodelock.take_command(logs, later)).stdout).state == "taken"
    assert parse_answer(bash(nodelock.inspect_command(logs)).stdout).holder == later


def test_a_folder_where_no_lock_can_be_made_is_an_error_not_a_holder(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "x").write_text("")
    res = bash(f"chmod 500 {logs} && " + nodelock.take_command(str(logs), A) if os.geteuid() != 0
               else nodelock.take_command(str(logs / "x"), A))  # root writes anywhere: a file as the folder
    assert res.returncode != 0 and "cvs-lock held" not in res.stdout, res.stdout
    assert res.stderr.strip()


def test_release_removes_only_the_own_lock(tmp_path):
    logs = str(tmp_path)
    bash(nodelock.take_command(logs, A))
    assert bash(nodelock.release_command(logs, B.run_id)).returncode == 0
    assert (tmp_path / ".cvs-lock" / "holder").is_file()
    assert bash(nodelock.release_command(logs, A.run_id)).returncode == 0
    assert not (tmp_path / ".cvs-lock").exists()


def test_a_stale_lock_is_replaced_only_while_it_reads_as_seen(tmp_path):
    logs = str(tmp_path)
    bash(nodelock.take_command(logs, A))
    seen = parse_answer(bash(nodelock.inspect_command(logs)).stdout).text
    assert parse_answer(bash(nodelock.take_stale_command(logs, "something else", B)).stdout).holder == A
    assert parse_answer(bash(nodelock.take_stale_command(logs, seen, B)).stdout).state == "taken"
    assert parse_answer(bash(nodelock.inspect_command(logs)).stdout).holder == B
    assert parse_answer(bash(nodelock.clear_stale_command(logs, seen)).stdout).holder == B  # changed: kept
    now = parse_answer(bash(nodelock.inspect_command(logs)).stdout).text
    assert parse_answer(bash(nodelock.clear_stale_command(logs, now)).stdout).state == "cleared"
    assert not (tmp_path / ".cvs-lock").exists()


def test_garbage_and_symlinked_locks_refuse_and_are_never_followed(tmp_path):
    logs = tmp_path / "logs"
    (logs / ".cvs-lock").mkdir(parents=True)
    (logs / ".cvs-lock" / "holder").write_bytes(b"\x00\x1b[2Jgarbage\n{not json")
    answer = parse_answer(bash(nodelock.take_command(str(logs), A)).stdout)
    assert answer.state == "held" and answer.holder is None and "\x1b" not in answer.text

    fifo = tmp_path / "fifo"
    (fifo / ".cvs-lock").mkdir(parents=True)
    os.mkfifo(fifo / ".cvs-lock" / "holder")  # never opened: reading it would block
    answer = parse_answer(bash(nodelock.take_command(str(fifo), A)).stdout)
    assert answer.state == "held" and answer.text == ""

    other = tmp_path / "other"
    outside = tmp_path / "outside"
    (outside).mkdir()
    (outside / "holder").write_text(A.to_json() + "\n")
    other.mkdir()
    (other / ".cvs-lock").symlink_to(outside)
    answer = parse_answer(bash(nodelock.take_command(str(other), A)).stdout)
    assert answer.state == "held" and answer.text == ""  # a linked lock is not read, not ours
    assert bash(nodelock.release_command(str(other), A.run_id)).returncode == 0
    assert (outside / "holder").is_file() and (other / ".cvs-lock").is_symlink()


def test_two_runs_racing_for_a_shared_folder_end_with_exactly_one_holder(tmp_path):
    logs = str(tmp_path)
    states: dict[str, list[str]] = {A.run_id: [], B.run_id: []}

    def take(holder: LockHolder) -> None:  # one run's nodes on shared storage, and a rival's
        states[holder.run_id].append(parse_answer(bash(nodelock.take_command(logs, holder)).stdout).state)

    threads = [threading.Thread(target=take, args=(h,)) for h in (A, B) * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    winner = parse_answer(bash(nodelock.inspect_command(logs)).stdout).holder
    loser = B if winner == A else A
    assert winner in (A, B)
    assert states[winner.run_id] == ["taken"] * 4 and states[loser.run_id] == ["held"] * 4
