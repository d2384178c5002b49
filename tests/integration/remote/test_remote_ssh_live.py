"""SshHosts against a real sshd on loopback: commands, put, incremental reads, host keys, trust."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from remote_sshd import FakeHost

from cvs_tasks.remote import NO_RETRY, Node, RetryPolicy, SshHosts, connect, trust


def test_run_returns_output_and_exit_status_per_node(sshd, make_cluster, trusted):
    with connect(make_cluster([sshd, sshd], trusted), connect_timeout=5) as hosts:
        results = hosts.run("echo out; echo err >&2; exit 7", timeout=10)
    assert [(r.host, r.rank, r.exit_code, r.stdout, r.stderr) for r in results] == [
        ("node0", 0, 7, "out\n", "err\n"), ("node1", 1, 7, "out\n", "err\n")]
    assert results[0].error == f"node node0 ({sshd.address}): exit status 7: err"


def test_per_node_commands_and_stdin_reach_the_right_node(sshd, make_cluster, trusted):
    with connect(make_cluster([sshd, sshd], trusted), connect_timeout=5) as hosts:
        results = hosts.run(["echo rank0", "cat"], timeout=10, stdin="pässword\n")
    assert [r.stdout for r in results] == ["rank0\n", "pässword\n"]


def test_command_timeout_is_a_per_node_error(sshd, make_cluster, trusted):
    with connect(make_cluster([sshd], trusted), connect_timeout=5) as hosts:
        started = time.monotonic()
        [result] = hosts.run("echo started; sleep 30", timeout=1.5)
    assert time.monotonic() - started < 10
    assert not result.ok and result.exit_code is None
    assert result.error == f"node node0 ({sshd.address}): command timed out after 1.5s"


def test_put_writes_binary_content_atomically_with_mode(sshd, make_cluster, trusted, tmp_path):
    target = tmp_path / "deep" / "token"
    payload = bytes(range(256)) * 400  # 100 KiB, every byte value
    with connect(make_cluster([sshd], trusted), connect_timeout=5) as hosts:
        [result] = hosts.put(payload, str(target), 0o600, timeout=30)
        [listing] = hosts.run(f"ls -a {target.parent}", timeout=10)
    assert result.ok, result.error
    assert target.read_bytes() == payload
    assert target.stat().st_mode & 0o777 == 0o600
    assert listing.stdout.split() == [".", "..", "token"]  # no temp file left behind


def test_read_from_advances_by_bytes_across_appends(sshd, make_cluster, trusted, tmp_path):
    log = tmp_path / "train.log"
    exit_file = tmp_path / "exit_code"
    with connect(make_cluster([sshd], trusted), connect_timeout=5) as hosts:
        [r0] = hosts.read_from([str(log)], [0], 1024, sidecars=[str(exit_file)], timeout=10)
        assert (r0.data, r0.offset, r0.size, r0.sidecar, r0.error) == ("", 0, None, None, None)
        log.write_bytes("step 1 loss 2.5 — ok\n".encode())
        [r1] = hosts.read_from([str(log)], [0], 1024, sidecars=[str(exit_file)], timeout=10)
        with log.open("ab") as fh:
            fh.write("step 2 ✓\n".encode())
        exit_file.write_text("0\n")
        [r2] = hosts.read_from([str(log)], [r1.offset], 1024, sidecars=[str(exit_file)], timeout=10)
    assert r1.data == "step 1 loss 2.5 — ok\n" and r1.offset == len("step 1 loss 2.5 — ok\n".encode())
    assert r2.data == "step 2 ✓\n" and r2.offset == log.stat().st_size
    assert r2.sidecar == "0\n"


def test_unknown_host_key_is_refused_before_any_command(sshd, make_cluster, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    marker = tmp_path / "ran"
    cluster = make_cluster([sshd], empty)
    with connect(cluster, connect_timeout=5) as hosts:
        [result] = hosts.run(f"touch {marker}", timeout=10)
    assert not result.ok and not marker.exists()
    assert result.error.startswith(f"node node0 ({sshd.address}): host key ssh-ed25519 SHA256:")
    assert f"is not in {empty}" in result.error
    assert f"invoke cluster.trust --cluster {cluster.path}" in result.error


def test_changed_host_key_is_refused_loudly_with_file_and_line(sshd, sshd_factory, make_cluster,
                                                               tmp_path):
    impostor = sshd_factory.start("impostor", port=2299)
    known = tmp_path / "known_hosts"
    # Record the real server's key under the impostor's name: the impostor's key is "changed".
    kind, b64 = sshd.host_key.with_suffix(".pub").read_text().split()[:2]
    known.write_text(f"# comment\n[{impostor.address}]:2299 {kind} {b64}\n")
    with connect(make_cluster([impostor], known), connect_timeout=5) as hosts:
        [result] = hosts.run("true", timeout=10)
    assert not result.ok
    assert "HOST KEY CHANGED!" in result.error and f"{known}:2" in result.error
    assert "--replace" in result.error


def test_unreachable_node_is_named_within_the_connect_timeout(sshd, make_cluster, trusted):
    cluster = make_cluster([sshd], trusted,
                           extra_hosts=[FakeHost("ghost", "127.0.0.99", 22)])
    with connect(cluster, connect_timeout=2, retry=NO_RETRY) as hosts:
        started = time.monotonic()
        results = hosts.run("echo alive", timeout=10)
        elapsed = time.monotonic() - started
    assert results[0].ok and results[0].stdout == "alive\n"  # partial results are kept
    assert not results[1].ok
    assert results[1].error == "node ghost (127.0.0.99): connection refused (port 22)"
    assert elapsed < 5


def test_a_port_that_never_speaks_ssh_fails_within_the_connect_timeout():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        hosts = SshHosts([Node("mute", "127.0.0.1", port, 0)], username="root", key_file=None,
                         known_hosts=Path("/nonexistent"), connect_timeout=1, retry=NO_RETRY)
        started = time.monotonic()
        [result] = hosts.run("true", timeout=10)
        elapsed = time.monotonic() - started
    finally:
        listener.close()
    assert elapsed < 4
    assert result.error.startswith(f"node mute (127.0.0.1): no SSH handshake within 1s on port {port}")


def test_connect_retries_are_recorded(make_cluster, sshd, trusted):
    cluster = make_cluster([sshd], trusted, extra_hosts=[FakeHost("ghost", "127.0.0.99", 22)])
    with connect(cluster, connect_timeout=2,
                 retry=RetryPolicy(attempts=2, first_delay=0.1)) as hosts:
        results = hosts.run("true", timeout=10)
        attempts = hosts.attempts
    assert results[0].ok and not results[1].ok
    assert [(a.step, a.attempt, a.error) for a in attempts] == [
        ("ssh connect ghost (127.0.0.99)", n, "connection refused (port 22)") for n in (1, 2)]


def test_trust_records_new_keys_and_refuses_changed_ones(sshd, sshd_factory, make_cluster,
                                                         tmp_path):
    other = sshd_factory.start("second", port=2298)
    known = tmp_path / "kh" / "known_hosts"
    cluster = make_cluster([sshd, other], known)
    first = trust(cluster, known, timeout=5)
    assert [o.status for o in first] == ["added", "added"]
    assert known.read_text() == sshd.host_key_line() + other.host_key_line()
    assert known.stat().st_mode & 0o777 == 0o600
    assert [o.status for o in trust(cluster, known, timeout=5)] == ["known", "known"]

    # The second node "is reinstalled": its recorded key no longer matches.
    kind, b64 = sshd.host_key.with_suffix(".pub").read_text().split()[:2]
    known.write_text(sshd.host_key_line() + f"[{other.address}]:2298 {kind} {b64}\n")
    refused = trust(cluster, known, timeout=5)
    assert [o.status for o in refused] == ["known", "changed"]
    assert "HOST KEY CHANGED!" in refused[1].detail and f"{known}:2" in refused[1].detail
    assert known.read_text().count(b64) == 2  # untouched
    replaced = trust(cluster, known, replace=True, timeout=5)
    assert [o.status for o in replaced] == ["known", "replaced"]
    assert known.read_text() == sshd.host_key_line() + other.host_key_line()
    with connect(cluster, connect_timeout=5) as hosts:
        assert all(r.ok for r in hosts.run("true", timeout=10))


def test_trust_skips_local_nodes_and_names_unreachable_ones(tmp_path, sshd, make_cluster):
    known = tmp_path / "known_hosts"
    cluster = make_cluster([sshd], known, extra_hosts=[
        FakeHost("here", "localhost", local=True), FakeHost("ghost", "127.0.0.99", 22)])
    outcomes = trust(cluster, known, timeout=2)
    assert [(o.host, o.status, o.ok) for o in outcomes] == [
        ("node0", "added", True), ("here", "skipped", True), ("ghost", "error", False)]
    assert outcomes[2].detail.startswith("node ghost (127.0.0.99): cannot fetch the host key:")
    assert known.read_text() == sshd.host_key_line()
