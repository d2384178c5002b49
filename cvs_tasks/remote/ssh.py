"""``SshHosts``: nodes over SSH (fabric's Connection to connect), strict host keys, a deadline on every step.

* connect: ``timeout``/``banner_timeout``/``auth_timeout``/``channel_timeout`` all bounded by
  the connect timeout (passed in ``connect_kwargs`` only: fabric's own ``connect_timeout``
  truncates to int and clashes with ``timeout``); retried for network errors, never for key
  or auth errors; keepalive on the transport once open. Connections stay open for the run.
* fan-out: connection set-up and exec requests go through a bounded window (``window``, default
  32 like pdsh; the cluster file's ``fanout_window``); the commands then run as raw exec channels
  read from one selector (``remote/channels.py``): per-command timeout, stdin, exact bytes back.
  No thread per node at all: every connection's packets are read by one reactor thread and a
  few workers (``remote/reactor.py``), not by a paramiko thread per connection.
* commands: plain strings (nothing via ``env=``: values would land on the command line); stdin
  is sent on the channel and then closed.
* followers (``follow``): one more exec channel per node on the same connection.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

import paramiko
from fabric import Config, Connection

from cvs_tasks.remote.channels import ChannelStream, Started, run_channels
from cvs_tasks.remote.hostkeys import (
    RevokedHostKey,
    StrictHostKeyPolicy,
    UnknownHostKey,
    describe_changed_key,
    describe_revoked_key,
    describe_unknown_key,
    host_key_name,
    pin_host_keys,
)
from cvs_tasks.remote.hosts import Hosts
from cvs_tasks.remote.reactor import ReactorTransport
from cvs_tasks.remote.results import Node, RawResult
from cvs_tasks.remote.retry import Attempt, RetryPolicy, retry_call
from cvs_tasks.remote.streams import FollowerStartError

# paramiko's words when the TCP connection opened but the SSH handshake never completed
_HANDSHAKE_FAILURES = ("protocol banner", "No existing session", "Negotiation failed")
FANOUT_WINDOW = 32  # like pdsh: at most this many nodes connect or start a command at once


class _SshNode:
    """One node's connection plus the lock that keeps two threads from opening it at once."""

    def __init__(self, node: Node, connection: Connection):
        self.node = node
        self.connection = connection
        self.lock = threading.Lock()
        self.final_error: str | None = None  # a host-key or auth refusal: never asked again


class SshHosts(Hosts):
    """SSH nodes; connections open lazily and are shared with ``subset`` views."""

    def __init__(self, nodes: Sequence[Node], *, username: str, key_file: str | None,
                 known_hosts: Path, connect_timeout: float = 10.0, keepalive: int = 30,
                 retry: RetryPolicy | None = None, cluster_file: str | os.PathLike | None = None,
                 window: int = FANOUT_WINDOW,
                 _shared: list[_SshNode] | None = None, _attempts: list[Attempt] | None = None):
        super().__init__(nodes)
        if window < 1:
            raise ValueError(f"the fan-out window must be at least 1, got {window}")
        self.window = window
        self.known_hosts = known_hosts
        self.connect_timeout = connect_timeout
        self.keepalive = keepalive
        self.retry = retry or RetryPolicy(attempts=2, first_delay=1.0)
        self.cluster_file = cluster_file
        if _attempts is not None:
            self._attempts = _attempts
        self._owner = _shared is None
        self._ssh = _shared if _shared is not None else [
            _SshNode(n, self._new_connection(n, username, key_file)) for n in self.nodes]

    # --- connections ----------------------------------------------------------------------
    def _new_connection(self, node: Node, username: str, key_file: str | None) -> Connection:
        bound = self.connect_timeout
        connect_kwargs: dict = {"timeout": bound, "banner_timeout": bound, "auth_timeout": bound,
                                "channel_timeout": bound, "transport_factory": ReactorTransport}
        if key_file:
            connect_kwargs.update(key_filename=[os.path.expanduser(key_file)], look_for_keys=False,
                                  allow_agent=False)
        config = Config(ssh_config=paramiko.SSHConfig())  # no ~/.ssh/config surprises
        connection = Connection(host=node.address, user=username, port=node.port,
                                connect_kwargs=connect_kwargs, config=config)
        # Fabric installs AutoAddPolicy; replace it before anything can connect.
        pin_host_keys(connection.client, self.known_hosts, host_key_name(node.address, node.port))
        connection.client.set_missing_host_key_policy(StrictHostKeyPolicy(self.known_hosts))
        return connection

    def _open(self, ssh: _SshNode) -> str | None:
        """Open the node's connection if needed; the reason it failed, or None."""
        with ssh.lock:
            if ssh.connection.is_connected:
                return None
            if ssh.final_error is not None:
                return ssh.final_error
            label = f"ssh connect {ssh.node.label}"
            error = retry_call(label, lambda: self._try_open(ssh), _retryable_only,
                               self.retry, self.attempts)
            return None if error is None else error[0]

    def _try_open(self, ssh: _SshNode) -> tuple[str, bool] | None:
        try:
            ssh.connection.open()
        except Exception as exc:  # noqa: BLE001 - every failure becomes this node's error
            _close_quietly(ssh.connection)
            if not _is_retryable(exc):
                ssh.final_error = self._describe(ssh.node, exc)
                return ssh.final_error, False
            return self._describe(ssh.node, exc), True
        transport = ssh.connection.transport
        if transport is not None and self.keepalive:
            transport.set_keepalive(self.keepalive)
        return None

    def _describe(self, node: Node, exc: BaseException) -> str:
        return describe_exception(node, exc, self.known_hosts, self.cluster_file,
                                  self.connect_timeout)

    # --- fan-out --------------------------------------------------------------------------
    def _exec_many(self, commands, stdins, timeout):
        """Start every node's command through the window (connecting first where needed), then
        read them all to their ends from one selector in this thread."""
        out: list[RawResult | None] = [None] * len(self._ssh)
        started: dict[int, Started] = {}

        def start(index: int) -> None:
            ssh = self._ssh[index]
            error = self._open(ssh)
            if error is not None:
                out[index] = RawResult(None, b"", b"", error, final=ssh.final_error is not None)
                return
            try:
                channel = ssh.connection.transport.open_session(timeout=self.connect_timeout)
                began = time.monotonic()
                channel.exec_command(commands[index])
            except Exception as exc:  # noqa: BLE001 - every failure becomes this node's error
                out[index] = self._raw_from_exception(ssh.node, exc)
                return
            started[index] = Started(channel, stdins[index], began)

        self._in_window(start, range(len(self._ssh)))
        for index, raw in run_channels(started, timeout).items():
            out[index] = raw
        return [r if r is not None else RawResult(None, b"", b"", "no result from the SSH fan-out") for r in out]

    def _in_window(self, work, indices) -> None:
        """``work(i)`` for every index, at most ``window`` at a time (connection set-up and exec
        requests wait on the node; the window bounds how many wait at once, and the threads)."""
        todo = list(indices)
        if len(todo) <= 1:
            for index in todo:
                work(index)
            return
        with ThreadPoolExecutor(max_workers=min(self.window, len(todo)), thread_name_prefix="cvs-ssh-window") as pool:
            list(pool.map(work, todo))

    def _follower_start_all(self):
        """Followers start through the window: each waits for its node to open a channel and
        accept the exec request (and to connect first, if it was not)."""
        def start_all(opener, jobs):
            out: list = [None] * len(jobs)

            def start(k: int) -> None:
                try:
                    out[k] = opener(*jobs[k])
                except Exception as exc:  # noqa: BLE001 - every failure to start is this node's Lost
                    out[k] = exc

            self._in_window(start, range(len(jobs)))
            return out

        return start_all

    def _follower_opener(self):
        """A follower is one exec channel on the node's open connection (opened first if needed)."""
        def open_follower(index: int, args) -> ChannelStream:
            ssh = self._ssh[index]
            error = self._open(ssh)
            if error is not None:
                raise FollowerStartError(error)
            return ChannelStream(ssh.connection.transport, args.command(), self.connect_timeout)

        return open_follower

    def _raw_from_exception(self, node: Node, exc: BaseException) -> RawResult:
        return RawResult(None, b"", b"", self._describe(node, exc))

    def subset(self, indices):
        picked = [self._ssh[i] for i in indices]
        view = SshHosts([s.node for s in picked], username="", key_file=None,
                        known_hosts=self.known_hosts, connect_timeout=self.connect_timeout,
                        keepalive=self.keepalive, retry=self.retry, cluster_file=self.cluster_file,
                        window=self.window, _shared=picked, _attempts=self.attempts)
        return view

    def close(self) -> None:
        if not self._owner:
            return
        for ssh in self._ssh:
            with ssh.lock:
                _close_quietly(ssh.connection)


def _close_quietly(connection: Connection) -> None:
    try:
        connection.close()
    except Exception:  # noqa: BLE001 - closing a broken connection must not mask the real error
        pass


def _retryable_only(outcome: tuple[str, bool] | None) -> str | None:
    """retry_call judge: retry network failures; a key or auth failure is final."""
    if outcome is None or not outcome[1]:
        return None
    return outcome[0]


# paramiko's AuthenticationException when the connection died during authentication (a node's
# sshd dropping it under load, seen at 1,024 nodes on one machine): not a refused key, so retried
_AUTH_CUT_OFF = "transport shut down or saw EOF"


def _is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, paramiko.AuthenticationException) and _AUTH_CUT_OFF in str(exc):
        return True
    if isinstance(exc, (paramiko.BadHostKeyException, UnknownHostKey, RevokedHostKey,
                        paramiko.AuthenticationException)):
        return False
    return isinstance(exc, (OSError, socket.timeout, EOFError, paramiko.SSHException))


def describe_exception(node: Node, exc: BaseException, known_hosts: Path,
                       cluster_file: str | os.PathLike | None, connect_timeout: float) -> str:
    """Turn whatever fabric/paramiko raised into the words a user can act on."""
    if isinstance(exc, paramiko.BadHostKeyException):
        return describe_changed_key(node, exc, known_hosts, cluster_file)
    if isinstance(exc, RevokedHostKey):
        return describe_revoked_key(node, exc, known_hosts)
    if isinstance(exc, UnknownHostKey):
        return describe_unknown_key(node, exc, known_hosts, cluster_file)
    if isinstance(exc, paramiko.AuthenticationException):
        return f"authentication failed ({exc}); check username and priv_key_file in the cluster file"
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        errors = list(exc.errors.values())
        if errors and all(isinstance(e, ConnectionRefusedError) for e in errors):
            return f"connection refused (port {node.port})"
        return f"cannot connect to port {node.port}: " + "; ".join(
            (e.strerror or str(e)) for e in errors)
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"connect timed out after {connect_timeout:g}s (port {node.port})"
    if isinstance(exc, ConnectionRefusedError):
        return f"connection refused (port {node.port})"
    if isinstance(exc, OSError):
        return f"cannot connect to port {node.port}: {exc.strerror or exc}"
    if isinstance(exc, paramiko.SSHException):
        text = str(exc)
        if any(k in text for k in _HANDSHAKE_FAILURES):
            return (f"no SSH handshake within {connect_timeout:g}s on port {node.port} ({text}); "
                    "is sshd answering there?")
        return f"ssh error: {text}"
    if isinstance(exc, EOFError):
        return "ssh connection closed by the node"
    return f"{type(exc).__name__}: {exc}"

