"""``ReactorTransport``: paramiko connections with no thread of their own, against a paramiko server.

The server side is paramiko's own (a thread per connection, as a server may have); the client side
is the harness's: its packets are read by the shared reactor, whatever the number of connections.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import socket
import threading
import time
import tokenize

import paramiko
import pytest

from cvs_tasks.remote import reactor as reactor_module
from cvs_tasks.remote.reactor import ReactorTransport, reactor

HOST_KEY = paramiko.ECDSAKey.generate()
USER = "ops"
WAIT_S = 20.0  # bound on every wait here (a loaded 2-core machine)

# ``Transport.run`` of the paramiko versions ReactorTransport._dispatch was read against (3.4.1,
# 3.5.1, 4.0.0, 5.0.1 and 5.1.0 share one loop), as tokens without comments or layout.
KNOWN_RUN_LOOPS = {"72d2d47bbd29"}


def run_loop_digest() -> str:
    source = inspect.getsource(paramiko.Transport.run)
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    kept = [t.string for t in tokens if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE,
                                                         tokenize.INDENT, tokenize.DEDENT)]
    return hashlib.sha256(" ".join(kept).encode()).hexdigest()[:12]


def test_paramikos_loop_is_the_one_the_reactor_copies():
    assert run_loop_digest() in KNOWN_RUN_LOOPS, (
        f"paramiko {paramiko.__version__} changed Transport.run: compare it with "
        "ReactorTransport._dispatch (cvs_tasks/remote/reactor.py), then add its digest here")


class _Server(paramiko.ServerInterface):
    """Accepts USER with the client key; answers ``exec`` by echoing the command back."""

    def __init__(self, client_key: paramiko.PKey):
        self.client_key = client_key
        self.commands: list[bytes] = []
        self.exec_seen = threading.Event()

    def check_auth_publickey(self, username, key):
        ok = username == USER and key.asbytes() == self.client_key.asbytes()
        return paramiko.AUTH_SUCCESSFUL if ok else paramiko.AUTH_FAILED

    def get_allowed_auths(self, username):
        return "publickey"

    def check_channel_request(self, kind, chanid):
        return paramiko.OPEN_SUCCEEDED if kind == "session" else paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_exec_request(self, channel, command):
        self.commands.append(command)
        self.exec_seen.set()
        return True


class Pair:
    """A server transport (paramiko's, threaded) and a client ReactorTransport on a socketpair."""

    def __init__(self, client_key: paramiko.PKey):
        self.client_sock, self.server_sock = socket.socketpair()
        self.server = paramiko.Transport(self.server_sock)
        self.server.add_server_key(HOST_KEY)
        self.interface = _Server(client_key)
        self.server.start_server(event=threading.Event(), server=self.interface)
        self.client = ReactorTransport(self.client_sock)
        self.client.start_client(timeout=WAIT_S)
        self.client.auth_publickey(USER, client_key)

    def serve_one(self, reply: bytes, status: int = 0) -> threading.Thread:
        """Answer the next exec request with ``reply`` and ``status`` (in a thread: it waits)."""
        def answer():
            channel = self.server.accept(WAIT_S)
            assert channel is not None
            assert self.interface.exec_seen.wait(WAIT_S)
            self.interface.exec_seen.clear()
            channel.sendall(reply)
            channel.send_exit_status(status)
            channel.close()

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        self.client.close()
        self.server.close()
        self.client_sock.close()
        self.server_sock.close()


@pytest.fixture(scope="module")
def client_key():
    return paramiko.ECDSAKey.generate()


def _run(pair: Pair, command: str, reply: bytes, status: int = 0) -> tuple[bytes, int]:
    answering = pair.serve_one(reply, status)
    channel = pair.client.open_session(timeout=WAIT_S)
    channel.settimeout(WAIT_S)
    channel.exec_command(command)
    out = b""
    while chunk := channel.recv(65536):
        out += chunk
    code = channel.recv_exit_status()
    answering.join(WAIT_S)
    return out, code


def test_a_command_runs_and_its_bytes_and_status_come_back(client_key):
    pair = Pair(client_key)
    try:
        big = bytes(range(256)) * 4096  # 1 MiB: many packets, window adjustments on the way
        out, code = _run(pair, "cat big", big, status=3)
        assert (out, code) == (big, 3)
        assert pair.interface.commands == [b"cat big"]
    finally:
        pair.close()


def test_many_connections_add_no_thread(client_key):
    reactor()  # started once per process, before: its threads are nobody's connection
    before = set(threading.enumerate())
    pairs = [Pair(client_key) for _ in range(12)]
    try:
        for k, pair in enumerate(pairs):
            assert _run(pair, f"echo {k}", f"{k}\n".encode()) == (f"{k}\n".encode(), 0)
        new = set(threading.enumerate()) - before - {p.server for p in pairs}  # the servers' own
        assert [t for t in new if not isinstance(t, threading.Timer)] == []  # a handshake timer may linger
        assert not any(p.client.is_alive() for p in pairs)
    finally:
        for pair in pairs:
            pair.close()


def test_the_peer_going_away_wakes_every_waiter_and_the_reactor_lets_go(client_key):
    pair = Pair(client_key)
    try:
        assert pair.client.is_active()
        held = reactor().connections
        pair.server.close()  # the peer disconnects
        deadline = time.monotonic() + WAIT_S
        while pair.client.is_active() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not pair.client.is_active()
        with pytest.raises(paramiko.SSHException):
            pair.client.open_session(timeout=WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while reactor().connections >= held and time.monotonic() < deadline:
            time.sleep(0.01)
        assert reactor().connections < held
    finally:
        pair.close()


def test_a_peer_stuck_mid_packet_is_shut_down_and_frees_its_worker(client_key, monkeypatch):
    monkeypatch.setattr(reactor_module, "STALL_S", 0.5)
    pair = Pair(client_key)
    other = Pair(client_key)
    try:
        pair.server_sock.sendall(b"\x00\x00\x00")  # less than a cipher block: the client waits for more
        deadline = time.monotonic() + WAIT_S
        while pair.client.is_active() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not pair.client.is_active()
        assert "part of a packet" in str(pair.client.get_exception())
        assert _run(other, "still there", b"yes\n") == (b"yes\n", 0)
    finally:
        pair.close()
        other.close()


def test_a_failed_banner_ends_the_connection_with_paramikos_words():
    ours, theirs = socket.socketpair()
    try:
        theirs.sendall(b"HTTP/1.1 400 Bad Request\r\n" * 2)
        theirs.shutdown(socket.SHUT_WR)
        client = ReactorTransport(ours)
        client.banner_timeout = 5
        with pytest.raises(paramiko.SSHException, match="banner|Indecipherable|Error reading"):
            client.start_client(timeout=WAIT_S)
        assert not client.is_active() and not client.is_alive()
    finally:
        ours.close()
        theirs.close()


def test_keepalives_are_sent_from_the_pool_when_nothing_else_was(client_key, monkeypatch):
    pair = Pair(client_key)
    try:
        seen = threading.Event()
        real = pair.client.global_request

        def spy(kind, data=None, wait=True):
            if kind == "keepalive@lag.net":
                seen.set()
            return real(kind, data, wait)

        monkeypatch.setattr(pair.client, "global_request", spy)
        pair.client.set_keepalive(1)
        assert seen.wait(WAIT_S)
        assert pair.client.is_active()
    finally:
        pair.close()



def test_a_forked_child_starts_its_own_reactor():
    import os

    parent = reactor()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a fresh reactor whose threads run here
        try:
            child = reactor()
            ok = child is not parent and all(t.is_alive() for t in child.threads)
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    try:
        assert os.read(read, 1) == b"1"
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    assert reactor() is parent
