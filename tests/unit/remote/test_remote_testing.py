"""The scripted Hosts: answers what the script holds, refuses the rest, reports what never came."""

from __future__ import annotations

import re

import pytest

from cvs_tasks.remote import RetryPolicy
from cvs_tasks.remote.follow import Delta, Exited, FollowOptions, FollowTarget, Lost
from cvs_tasks.remote.shellcmd import put_command
from cvs_tasks.remote.testing import ScriptedHosts, UnexpectedCommand, answer, put_target


def test_answers_per_node_through_the_real_decoding():
    hosts = ScriptedHosts(["n0", "n1"])
    hosts.expect("docker version", stdout="27.1\n", on="n0")
    hosts.expect("docker version", exit=1, stderr="Cannot connect to the Docker daemon\n", on="n1")
    results = hosts.run("docker version", timeout=5)
    assert [(r.ok, r.stdout) for r in results] == [(True, "27.1\n"), (False, "")]
    assert results[1].error == "node n1: exit status 1: Cannot connect to the Docker daemon"
    hosts.assert_done()


def test_an_unexpected_command_fails_at_once_naming_node_and_command():
    hosts = ScriptedHosts(["n0"])
    hosts.expect("true")
    with pytest.raises(UnexpectedCommand, match=r"node n0: unexpected command: rm -rf /x; next expected: `true`"):
        hosts.run("rm -rf /x", timeout=5)
    with pytest.raises(AssertionError) as exc:  # remembered, even if the code under test swallowed it
        hosts.assert_done()
    assert "unexpected command: rm -rf /x" in str(exc.value) and "expected `true` 1 time(s), got it 0" in str(exc.value)


def test_leaving_the_block_reports_expectations_never_met():
    with pytest.raises(AssertionError, match=r"node n1: expected /\^docker run / 1 time\(s\), got it 0"):
        with ScriptedHosts(["n0", "n1"]) as hosts:
            hosts.expect(re.compile(r"^docker run "), stdout="id\n")
            hosts.subset([0]).run("docker run -d img", timeout=5)
    assert hosts.closed == 1


def test_order_is_checked_per_node_unless_relaxed_and_allow_is_never_required():
    hosts = ScriptedHosts(["n0"])
    hosts.expect("a").expect("b").allow(lambda c: c.startswith("mkdir "))
    with pytest.raises(UnexpectedCommand, match="next expected: `a`"):
        hosts.run("b", timeout=1)
    relaxed = ScriptedHosts(["n0"], ordered=False)
    relaxed.expect("a").expect("b", times=2).allow(lambda c: c.startswith("mkdir "))
    for command in ("b", "mkdir -p /x", "a", "b"):
        relaxed.run(command, timeout=1)
    relaxed.assert_done()
    assert relaxed.commands("n0") == ["b", "mkdir -p /x", "a", "b"]


def test_a_reply_function_sees_the_call_and_transport_errors_are_not_exit_codes():
    hosts = ScriptedHosts(["n0", "n1"])
    hosts.expect(re.compile("^echo "), reply=lambda call: answer(f"{call.node}:{call.command[5:]}\n"))
    hosts.expect("true", error="ssh: connect to host n1: Connection refused", on="n1")
    assert [r.stdout for r in hosts.run(["echo a", "echo b"], timeout=1)] == ["n0:a\n", "n1:b\n"]
    [down] = hosts.subset([1]).run("true", timeout=1)
    assert down.exit_code is None and down.error == "node n1: ssh: connect to host n1: Connection refused"
    hosts.assert_done()


def test_run_until_ok_reasks_only_the_failing_node():
    hosts = ScriptedHosts(["a", "b"])
    hosts.expect("docker pull img", on="a")
    hosts.expect("docker pull img", exit=1, stderr="TLS handshake timeout", on="b")
    hosts.expect("docker pull img", on="b")
    record, slept = [], []
    results = hosts.run_until_ok("docker pull img", timeout=5, step="docker pull",
                                 policy=RetryPolicy(attempts=3, first_delay=0.5), record=record,
                                 sleep=slept.append)
    assert all(r.ok for r in results) and slept == [0.5]
    assert [(a.attempt, a.error) for a in record] == [(1, "node b: exit status 1: TLS handshake timeout")]
    hosts.assert_done()


def test_puts_are_matched_by_path_and_their_data_kept():
    hosts = ScriptedHosts(["n0"])
    hosts.expect_put(re.compile(r"/run-7/job\.sh$"), data=b"#!/bin/sh\n")
    hosts.put(b"#!/bin/sh\n", "/s/run-7/job.sh", 0o700, timeout=5)
    assert hosts.written("n0") == {"/s/run-7/job.sh": b"#!/bin/sh\n"}
    assert put_target(put_command("/a b/it's", 0o600)) == "/a b/it's" and put_target("mv -f a b") is None
    hosts.assert_done()
    with pytest.raises(UnexpectedCommand, match=r"node n0: unexpected command: a put of /s/run-7/job.sh \(5 bytes\)"):
        hosts.put(b"other", "/s/run-7/job.sh", 0o700, timeout=5)


def test_a_scripted_log_grows_by_one_chunk_per_poll_and_shows_the_exit_status():
    hosts = ScriptedHosts(["n0"])
    [log] = hosts.expect_read(re.compile(r"training\.log$"), ["one\n", "twö\n"], exit_code=3)
    first = hosts.read_from(["/l/training.log"], [0], 64, sidecars=["/l/exit"], timeout=5)[0]
    assert (first.data, first.offset, first.size, first.sidecar) == ("one\n", 4, 4, None)
    second = hosts.read_from(["/l/training.log"], [4], 64, sidecars=["/l/exit"], timeout=5)[0]
    assert (second.data, second.offset, second.sidecar) == ("twö\n", 9, "3\n")
    assert log.polls == 2 and log.sent == 9
    hosts.assert_done()


def test_a_log_read_cut_in_a_character_and_a_log_never_finished_are_reported():
    hosts = ScriptedHosts(["n0"])
    hosts.expect_read("/l/a.log", ["abc\u00e9"])
    [cut] = hosts.read_from(["/l/a.log"], [0], 4, timeout=5)  # a, b, c and half of é
    assert (cut.data, cut.offset) == ("abc", 3)  # the half character waits for the next read
    hosts.expect_read("/l/b.log", ["x", "y"])
    hosts.read_from(["/l/b.log"], [0], 8, timeout=5)
    assert hosts.unmet() == ["node n0: log `/l/b.log`: read 1 time(s), 1 of 2 chunk(s) never read"]
    with pytest.raises(UnexpectedCommand, match="a read of /l/c.log"):
        hosts.read_from(["/l/c.log"], [0], 8, timeout=5)


def test_followers_look_once_per_poll_interval_of_the_scripts_clock():
    now = [0.0]
    hosts = ScriptedHosts(["n0", "n1"], clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    [log] = hosts.expect_read("/l/t.log", ["one\n", "two\n"], exit_code=0, drops=(2,), on="n0")
    hosts.expect_read("/l/t.log", error="connection refused", on="n1")
    targets = [FollowTarget("/l/t.log", "/l/exit")] * 2
    with hosts.follow(targets, FollowOptions(poll_s=2.0, frame_bytes=3)) as follow:
        assert follow.events(1.0) == [Lost(1, "node n1: following /l/t.log: connection refused")]
        assert follow.events(1.0) == [Delta(0, 0, b"one"), Delta(0, 3, b"\n")] and now[0] == 0.0
        assert follow.events(1.0) == [] and now[0] == 1.0  # waited its timeout, the next look is at 2
        [lost] = follow.events(5.0)
        assert isinstance(lost, Lost) and now[0] == 2.0  # the second look grew the log, then the follower died
        follow.restart(0, 4)
        assert follow.events(5.0) == [Delta(0, 4, b"two"), Delta(0, 7, b"\n"), Exited(0, 0, 8)]
    assert log.sent == 8 and "follow /l/t.log from 4" in hosts.commands("n0")
    hosts.assert_done()


def test_an_unreachable_log_fails_every_read_with_the_node_named():
    hosts = ScriptedHosts(["n0", "n1"])
    hosts.expect_read("/l/t.log", ["x\n"], on="n0")
    hosts.expect_read("/l/t.log", error="connection refused", on="n1", complete=False)
    ok, down = hosts.read_from(["/l/t.log"] * 2, [0, 0], 64, timeout=5)
    assert ok.data == "x\n" and down.error == "node n1: reading /l/t.log: connection refused"
    hosts.assert_done()
