"""SshHosts fan-out over fabric's MockRemote: what is sent, what comes back, how failures read.

MockRemote mocks the SSH clients (connect, host keys, the transport); the exec channels are
``FakeChannel``s with a real descriptor, as the one selector loop that reads them needs
(``remote/channels.py``). MockRemote's own ``safety()`` insists on a bare ``connect(username,
hostname, port)`` call, but SshHosts always passes timeouts; so these tests check the mocked
clients and the channels directly.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import paramiko
import pytest
from fabric.testing.base import MockRemote

from cvs_tasks.remote import NO_RETRY, Node, RetryPolicy, SshHosts
from cvs_tasks.remote.hostkeys import StrictHostKeyPolicy, UnknownHostKey
from cvs_tasks.remote.reactor import ReactorTransport
from tests.ssh_fakes import FakeChannel, channels

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
    made = channels(remote, FakeChannel(out=b"n1\n"), FakeChannel(err=b"oops\n", exit=3), None)
    remote.sessions[2].client.connect.side_effect = REFUSED
    results = make_hosts(3).run("hostname", timeout=30)
    assert [(r.host, r.rank, r.ok, r.exit_code, r.stdout) for r in results] == [
        ("10.0.0.1", 0, True, 0, "n1\n"), ("10.0.0.2", 1, False, 3, ""),
        ("10.0.0.3", 2, False, None, "")]
    assert [r.error for r in results] == [
        None, "node 10.0.0.2: exit status 3: oops", "node 10.0.0.3: connection refused (port 22)"]
    assert [c.command for c in made] == ["hostname", "hostname"]
    assert all(c.eof_sent and c.closed for c in made)  # no stdin: EOF at once; every channel closed


def test_strict_policy_is_set_before_connecting_with_bounded_timeouts(remote, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text("")
    channels(remote, FakeChannel())
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
        look_for_keys=False, allow_agent=False, transport_factory=ReactorTransport)
    client.get_transport.return_value.set_keepalive.assert_called_once_with(15)


def test_connection_is_opened_once_and_reused(remote):
    made = channels(remote, [FakeChannel(), FakeChannel()])
    hosts = make_hosts(1)
    hosts.run("a", timeout=5)
    hosts.run("b", timeout=5)
    remote.sessions[0].client.connect.assert_called_once()
    assert [c.command for c in made] == ["a", "b"]


def test_per_node_commands_and_stdin_travel_separately(remote):
    made = channels(remote, FakeChannel(), FakeChannel())
    results = make_hosts(2).run(["cat > /x", "cat > /y"], timeout=5, stdin="s3cret-value")
    assert all(r.ok for r in results)
    assert [c.command for c in made] == ["cat > /x", "cat > /y"]
    for channel in made:
        assert bytes(channel.stdin) == b"s3cret-value" and channel.eof_sent
        assert not hasattr(channel, "update_environment")  # nothing via env= (values would be inlined)


def test_put_sends_content_on_stdin_only(remote):
    payload = bytes(range(256)) * 300  # larger than one stdin chunk, every byte value
    [channel] = channels(remote, FakeChannel())
    [result] = make_hosts(1).put(payload, "/run/cvs/token", 0o600, timeout=5)
    assert result.ok
    assert bytes(channel.stdin) == payload
    sent = channel.command
    assert sent.startswith("umask 077 && mkdir -p /run/cvs && cat > /run/cvs/token.cvs-tmp.$$")


def test_read_from_decodes_bytes_and_advances_by_bytes(remote):
    body = "loss 2.5 ✓\n".encode()
    channels(remote, FakeChannel(out=b"CVSREAD 120 300a\n" + body + "€".encode()[:2]),
             FakeChannel(out=b"CVSREAD - -\n"))
    results = make_hosts(2).read_from(["/l/a", "/l/b"], [100, 0], 64, sidecars=["/l/rc", "/l/rc"],
                                      timeout=5)
    assert [(r.data, r.offset, r.size, r.sidecar, r.error) for r in results] == [
        ("loss 2.5 ✓\n", 100 + len(body), 120, "0\n", None), ("", 0, None, None, None)]


def test_command_timeout_becomes_that_nodes_error(remote):
    [stuck, _] = channels(remote, FakeChannel(out=b"started\n", hangs=True), FakeChannel())
    os.write(stuck._w, b"!")  # its first words arrive, then nothing
    results = make_hosts(2).run("sleep 600", timeout=0.2)
    assert results[0].error == "node 10.0.0.1: command timed out after 0.2s"
    assert results[0].exit_code is None and results[0].stdout == "started\n" and stuck.closed
    assert results[1].ok


def test_a_node_whose_session_breaks_does_not_lose_the_others(remote):
    channels(remote, FakeChannel(), None)
    transport = remote.sessions[1].client.get_transport.return_value
    transport.open_session.side_effect = paramiko.SSHException("Unable to open channel.")
    results = make_hosts(2).run("true", timeout=5)
    assert results[0].ok
    assert results[1].error == "node 10.0.0.2: ssh error: Unable to open channel."


def test_same_address_twice_still_gets_two_results(remote):
    channels(remote, FakeChannel(out=b"a\n"), FakeChannel(out=b"b\n"))
    hosts = SshHosts([Node("x", "10.0.0.9", rank=0), Node("y", "10.0.0.9", rank=1)],
                     username="root", key_file=None, known_hosts=Path("/none"), retry=NO_RETRY)
    assert [r.stdout for r in hosts.run("id", timeout=5)] == ["a\n", "b\n"]


def test_network_errors_are_retried_and_recorded_but_key_errors_are_not(remote, tmp_path):
    channels(remote, FakeChannel(), None)
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


def test_a_connection_cut_off_during_authentication_is_retried_but_a_refused_key_is_not(remote):
    channels(remote, FakeChannel(), None)
    cut_off = paramiko.AuthenticationException("Authentication failed: transport shut down or saw EOF")
    remote.sessions[0].client.connect.side_effect = [cut_off, None]
    remote.sessions[1].client.connect.side_effect = paramiko.AuthenticationException("Authentication failed.")
    hosts = make_hosts(2, retry=RetryPolicy(attempts=3, first_delay=0))
    results = hosts.run(["true", "true"], timeout=5)
    assert results[0].ok and remote.sessions[0].client.connect.call_count == 2
    assert not results[1].ok and remote.sessions[1].client.connect.call_count == 1
    assert "authentication failed" in results[1].error


def test_changed_key_names_the_known_hosts_line(remote, tmp_path):
    old, new = fake_key(2), fake_key(3)
    known = tmp_path / "known_hosts"
    known.write_text(f"other ssh-ed25519 {new.get_base64()}\n[10.0.0.1]:2222 ssh-ed25519 {old.get_base64()}\n")
    channels(remote, None)
    remote.sessions[0].client.connect.side_effect = paramiko.BadHostKeyException("10.0.0.1", new, old)
    hosts = SshHosts([Node("n1", "10.0.0.1", 2222, 0)], username="root", key_file=None,
                     known_hosts=known, retry=RetryPolicy(attempts=3, first_delay=0))
    [result] = hosts.run("true", timeout=5)
    assert result.error.startswith(f"node n1 (10.0.0.1): HOST KEY CHANGED! {known}:2 has ssh-ed25519 "
                                   f"{old.fingerprint} but the node now offers {new.fingerprint}")
    assert "--replace" in result.error
    assert remote.sessions[0].client.connect.call_count == 1


def test_connections_and_exec_requests_go_through_the_window(remote):
    made = channels(remote, *[FakeChannel(out=b"%d\n" % i) for i in range(6)])
    inside, most = [0], [0]
    lock = threading.Lock()
    real_open = SshHosts._open

    def counting_open(self, ssh):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            threading.Event().wait(0.05)  # long enough for the others to pile up if they could
            return real_open(self, ssh)
        finally:
            with lock:
                inside[0] -= 1

    SshHosts._open = counting_open
    try:
        results = make_hosts(6, window=2).run("hostname", timeout=5)
    finally:
        SshHosts._open = real_open
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(6)] and len(made) == 6
    assert most[0] == 2


def test_the_window_must_hold_a_node():
    with pytest.raises(ValueError, match="at least 1"):
        make_hosts(1, window=0)
