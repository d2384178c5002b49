"""SshHosts fan-out over fabric's MockRemote: what is sent, what comes back, how failures read.

MockRemote's own ``safety()`` insists on a bare ``connect(username, hostname, port)`` call, but
SshHosts always passes timeouts; so these tests check the mocked clients and channels directly.
"""

from __future__ import annotations

import threading
from pathlib import Path

import paramiko
import pytest
from fabric import Connection
from fabric.testing.base import Command, MockRemote, Session

from cvs_tasks.remote import NO_RETRY, Node, RetryPolicy, SshHosts
from cvs_tasks.remote.hostkeys import StrictHostKeyPolicy, UnknownHostKey
from cvs_tasks.remote.ssh import _BulkRemote

REFUSED = paramiko.ssh_exception.NoValidConnectionsError(
    {("10.0.0.3", 22): ConnectionRefusedError(111, "Connection refused")})


@pytest.fixture
def remote():
    mock = MockRemote()
    yield mock
    mock.stop()


def fake_key(fill: int) -> paramiko.PKey:
    """An ed25519 public key made of one repeated byte: enough for fingerprints and equality."""
    blob = b"\x00\x00\x00\x0bssh-ed25519" + b"\x00\x00\x00\x20" + bytes([fill]) * 32
    return paramiko.PKey.from_type_string("ssh-ed25519", blob)


def nodes(count: int, port: int = 22) -> list[Node]:
    return [Node(f"10.0.0.{i + 1}", f"10.0.0.{i + 1}", port, i) for i in range(count)]


def make_hosts(count: int, known_hosts: Path = Path("/nonexistent/known_hosts"),
               retry: RetryPolicy = NO_RETRY, **kw) -> SshHosts:
    return SshHosts(nodes(count), username="root", key_file="/keys/id_ed25519",
                    known_hosts=known_hosts, connect_timeout=5.0, retry=retry,
                    cluster_file="cluster.json", **kw)


def test_fan_out_keeps_partial_results_and_names_each_failure(remote):
    channels = remote.expect_sessions(
        Session(cmd="hostname", out=b"n1\n"),
        Session(cmd="hostname", err=b"oops\n", exit=3),
        Session())
    remote.sessions[2].client.connect.side_effect = REFUSED
    results = make_hosts(3).run("hostname", timeout=30)
    assert [(r.host, r.rank, r.ok, r.exit_code, r.stdout) for r in results] == [
        ("10.0.0.1", 0, True, 0, "n1\n"), ("10.0.0.2", 1, False, 3, ""),
        ("10.0.0.3", 2, False, None, "")]
    assert [r.error for r in results] == [
        None, "node 10.0.0.2: exit status 3: oops", "node 10.0.0.3: connection refused (port 22)"]
    for channel in channels[:2]:
        channel.exec_command.assert_called_once_with("hostname")


def test_strict_policy_is_set_before_connecting_with_bounded_timeouts(remote, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text("")
    remote.expect_sessions(Session(cmd="true"))
    make_hosts(1, known_hosts=known, keepalive=15).run("true", timeout=30)
    client = remote.sessions[0].client
    names = [c[0] for c in client.mock_calls]
    assert names.index("get_host_keys") < names.index("connect")
    policy_calls = [c for c in client.mock_calls if c[0] == "set_missing_host_key_policy"]
    assert isinstance(policy_calls[-1].args[0], StrictHostKeyPolicy)
    assert names.index("connect") > client.mock_calls.index(policy_calls[-1])
    client.connect.assert_called_once_with(
        username="root", hostname="10.0.0.1", port=22, timeout=5.0, banner_timeout=5.0,
        auth_timeout=5.0, channel_timeout=5.0, key_filename=["/keys/id_ed25519"],
        look_for_keys=False, allow_agent=False)
    client.get_transport.return_value.set_keepalive.assert_called_once_with(15)


def test_connection_is_opened_once_and_reused(remote):
    channels = remote.expect_sessions(Session(commands=[Command("a"), Command("b")]))
    hosts = make_hosts(1)
    hosts.run("a", timeout=5)
    hosts.run("b", timeout=5)
    remote.sessions[0].client.connect.assert_called_once()
    assert [c.exec_command.call_args.args[0] for c in channels] == ["a", "b"]


def test_per_node_commands_and_stdin_travel_separately(remote):
    channels = remote.expect_sessions(Session(cmd="cat > /x"), Session(cmd="cat > /y"))
    results = make_hosts(2).run(["cat > /x", "cat > /y"], timeout=5, stdin="s3cret-value")
    assert all(r.ok for r in results)
    for channel in channels:
        assert channel._stdin.getvalue() == b"s3cret-value"
        assert "s3cret" not in channel.exec_command.call_args.args[0]
        channel.update_environment.assert_not_called()  # nothing via env= (inline_ssh_env leaks)


def test_put_sends_content_on_stdin_only(remote):
    payload = bytes(range(256)) * 300  # larger than one stdin chunk, every byte value
    [channel] = remote.expect_sessions(Session(cmd=None))
    [result] = make_hosts(1).put(payload, "/run/cvs/token", 0o600, timeout=5)
    assert result.ok
    assert channel._stdin.getvalue() == payload
    sent = channel.exec_command.call_args.args[0]
    assert sent.startswith("umask 077 && mkdir -p /run/cvs && cat > /run/cvs/token.cvs-tmp.$$")


def test_read_from_decodes_bytes_and_advances_by_bytes(remote):
    body = "loss 2.5 ✓\n".encode()
    remote.expect_sessions(
        Session(out=b"CVSREAD 120 300a\n" + body + "€".encode()[:2]),
        Session(out=b"CVSREAD - -\n"))
    results = make_hosts(2).read_from(["/l/a", "/l/b"], [100, 0], 64, sidecars=["/l/rc", "/l/rc"],
                                      timeout=5)
    assert [(r.data, r.offset, r.size, r.sidecar, r.error) for r in results] == [
        ("loss 2.5 ✓\n", 100 + len(body), 120, "0\n", None), ("", 0, None, None, None)]


def test_command_timeout_becomes_that_nodes_error(remote):
    remote.expect_sessions(Session(cmd="sleep 600", waits=200), Session(cmd="sleep 600"))
    results = make_hosts(2).run("sleep 600", timeout=0.2)
    assert results[0].error == "node 10.0.0.1: command timed out after 0.2s"
    assert results[0].exit_code is None
    assert results[1].ok


def test_a_node_whose_session_breaks_does_not_lose_the_others(remote):
    remote.expect_sessions(Session(cmd="true"), Session(cmd="true"))
    transport = remote.sessions[1].client.get_transport.return_value
    transport.open_session.side_effect = paramiko.SSHException("Unable to open channel.")
    results = make_hosts(2).run("true", timeout=5)  # through ThreadingGroup + GroupException
    assert results[0].ok
    assert results[1].error == "node 10.0.0.2: ssh error: Unable to open channel."


def test_same_address_twice_still_gets_two_results(remote):
    remote.expect_sessions(Session(cmd="id", out=b"a\n"), Session(cmd="id", out=b"b\n"))
    hosts = SshHosts([Node("x", "10.0.0.9", rank=0), Node("y", "10.0.0.9", rank=1)],
                     username="root", key_file=None, known_hosts=Path("/none"), retry=NO_RETRY)
    assert [r.stdout for r in hosts.run("id", timeout=5)] == ["a\n", "b\n"]


def test_network_errors_are_retried_and_recorded_but_key_errors_are_not(remote, tmp_path):
    remote.expect_sessions(Session(cmd="true"), Session())
    first = remote.sessions[0].client
    first.connect.side_effect = [REFUSED, None]
    remote.sessions[1].client.connect.side_effect = UnknownHostKey("10.0.0.2", fake_key(1))
    hosts = make_hosts(2, retry=RetryPolicy(attempts=3, first_delay=0))
    results = hosts.run(["true", "true"], timeout=5)
    assert results[0].ok and first.connect.call_count == 2
    assert remote.sessions[1].client.connect.call_count == 1
    assert "is not in /nonexistent/known_hosts" in results[1].error
    assert "`invoke cluster.trust --cluster cluster.json`" in results[1].error
    assert [(a.step, a.attempt, a.error) for a in hosts.attempts] == [
        ("ssh connect 10.0.0.1", 1, "connection refused (port 22)")]


def test_changed_key_names_the_known_hosts_line(remote, tmp_path):
    old, new = fake_key(2), fake_key(3)
    known = tmp_path / "known_hosts"
    known.write_text(f"other ssh-ed25519 {new.get_base64()}\n[10.0.0.1]:2222 ssh-ed25519 {old.get_base64()}\n")
    remote.expect_sessions(Session())
    remote.sessions[0].client.connect.side_effect = paramiko.BadHostKeyException("10.0.0.1", new, old)
    hosts = SshHosts([Node("n1", "10.0.0.1", 2222, 0)], username="root", key_file=None,
                     known_hosts=known, retry=RetryPolicy(attempts=3, first_delay=0))
    [result] = hosts.run("true", timeout=5)
    assert result.error.startswith(f"node n1 (10.0.0.1): HOST KEY CHANGED! {known}:2 has ssh-ed25519 "
                                   f"{old.fingerprint} but the node now offers {new.fingerprint}")
    assert "--replace" in result.error
    assert remote.sessions[0].client.connect.call_count == 1


class _SlowClosingChannel:
    """Closing wakes the waiting thread at once, but the timer thread stays inside kill() until
    released: exactly the window in which a loaded machine reported `exit status -1`."""

    def __init__(self):
        self.closed = threading.Event()
        self.release = threading.Event()

    def close(self):
        self.closed.set()
        self.release.wait(10)


def test_a_timeout_is_a_timeout_even_while_the_timer_thread_is_still_closing_the_channel():
    runner = _BulkRemote(context=Connection("127.0.0.1"))
    runner.channel = channel = _SlowClosingChannel()
    runner.start_timer(0.01)
    try:
        assert channel.closed.wait(10)
        assert runner._timer.is_alive()  # invoke's own test ("timer thread ended") says: not timed out
        assert runner.timed_out
    finally:
        channel.release.set()
        runner._timer.join(10)
    assert runner.timed_out


def test_no_timer_no_timeout():
    runner = _BulkRemote(context=Connection("127.0.0.1"))
    assert not runner.timed_out
