"""``SshHosts``: nodes over SSH with fabric, strict host keys and a deadline on every step.

* connect: ``timeout``/``banner_timeout``/``auth_timeout``/``channel_timeout`` all bounded by
  the connect timeout (passed in ``connect_kwargs`` only: fabric's own ``connect_timeout``
  truncates to int and clashes with ``timeout``); retried for network errors, never for key
  or auth errors; keepalive on the transport once open.
* commands: plain strings (no ``env=``: fabric inlines env values into the command line),
  ``warn=True`` + ``hide=True`` + ``timeout``; stdout/stderr decoded as latin-1 so the exact
  bytes come back (UTF-8 decoding happens once, in ``results``).
* fan-out: one command for all nodes goes through ``ThreadingGroup`` (its GroupException is
  unpacked into per-node results); per-node commands and stdin use a thread per node.
"""

from __future__ import annotations

import io
import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

import paramiko
from fabric import Config, Connection, ThreadingGroup
from fabric.exceptions import GroupException
from fabric.runners import Remote
from invoke.exceptions import CommandTimedOut

from cvs_tasks.remote.channels import ChannelStream
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
from cvs_tasks.remote.results import Node, RawResult
from cvs_tasks.remote.retry import Attempt, RetryPolicy, retry_call
from cvs_tasks.remote.streams import FollowerStartError

_WIRE_ENCODING = "latin-1"  # byte-transparent: every byte maps to one code point and back
_STDIN_CHUNK = 64 * 1024
# paramiko's words when the TCP connection opened but the SSH handshake never completed
_HANDSHAKE_FAILURES = ("protocol banner", "No existing session", "Negotiation failed")


class _ChunkedStdin:
    """Stdin for invoke from bytes: hands out 64 KiB per read (invoke asks for 1 byte at a time
    from file-likes without a fileno and sleeps 10 ms between reads)."""

    def __init__(self, data: bytes):
        self._buf = io.BytesIO(data)

    def read(self, _size: int = -1) -> bytes:
        return self._buf.read(_STDIN_CHUNK)


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
                 _shared: list[_SshNode] | None = None, _attempts: list[Attempt] | None = None):
        super().__init__(nodes)
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
                                "channel_timeout": bound}
        if key_file:
            connect_kwargs.update(key_filename=[os.path.expanduser(key_file)], look_for_keys=False,
                                  allow_agent=False)
        config = Config(ssh_config=paramiko.SSHConfig(),  # no ~/.ssh/config surprises
                        overrides={"runners": {"remote": _BulkRemote}})
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
        broadcast = len(set(commands)) == 1 and all(s is None for s in stdins)
        identities = {(s.node.address, s.node.port) for s in self._ssh}
        if broadcast and len(identities) == len(self._ssh) and len(self._ssh) > 1:
            return self._exec_group(commands[0], timeout)
        if len(self._ssh) == 1:
            return [self._exec_one(self._ssh[0], commands[0], stdins[0], timeout)]
        with ThreadPoolExecutor(max_workers=len(self._ssh)) as pool:
            return list(pool.map(lambda args: self._exec_one(*args, timeout),
                                 zip(self._ssh, commands, stdins)))

    def _exec_one(self, ssh: _SshNode, command: str, stdin: bytes | None,
                  timeout: float) -> RawResult:
        error = self._open(ssh)
        if error is not None:
            return RawResult(None, b"", b"", error, final=ssh.final_error is not None)
        try:
            result = ssh.connection.run(command, **_run_kwargs(timeout, stdin))
        except Exception as exc:  # noqa: BLE001
            return self._raw_from_exception(ssh.node, exc)
        return _raw_from_result(result)

    def _exec_group(self, command: str, timeout: float) -> list[RawResult]:
        with ThreadPoolExecutor(max_workers=len(self._ssh)) as pool:
            open_errors = list(pool.map(self._open, self._ssh))
        out: list[RawResult | None] = [
            None if err is None else RawResult(None, b"", b"", err, final=s.final_error is not None)
            for s, err in zip(self._ssh, open_errors)]
        ready = [s for s, err in zip(self._ssh, open_errors) if err is None]
        if ready:
            group = ThreadingGroup.from_connections([s.connection for s in ready])
            try:
                group_result = group.run(command, **_run_kwargs(timeout, None))
            except GroupException as exc:  # some node raised: keep everyone's result
                group_result = exc.result
            by_connection = {id(conn): value for conn, value in group_result.items()}
            for ssh in ready:
                value = by_connection.get(id(ssh.connection))
                index = self._ssh.index(ssh)
                if value is None:
                    out[index] = RawResult(None, b"", b"", "no result from the SSH fan-out")
                elif isinstance(value, BaseException):
                    out[index] = self._raw_from_exception(ssh.node, value)
                else:
                    out[index] = _raw_from_result(value)
        return [r for r in out if r is not None]

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
        if isinstance(exc, CommandTimedOut):
            partial = exc.result
            return RawResult(None, _wire_bytes(partial.stdout), _wire_bytes(partial.stderr),
                             f"command timed out after {exc.timeout:g}s")
        return RawResult(None, b"", b"", self._describe(node, exc))

    def subset(self, indices):
        picked = [self._ssh[i] for i in indices]
        view = SshHosts([s.node for s in picked], username="", key_file=None,
                        known_hosts=self.known_hosts, connect_timeout=self.connect_timeout,
                        keepalive=self.keepalive, retry=self.retry, cluster_file=self.cluster_file,
                        _shared=picked, _attempts=self.attempts)
        return view

    def close(self) -> None:
        if not self._owner:
            return
        for ssh in self._ssh:
            with ssh.lock:
                _close_quietly(ssh.connection)


class _BulkRemote(Remote):
    """fabric's runner, minus two costs that make large reads quadratic: invoke re-joins the whole
    captured output on every 1000-byte chunk to feed stream watchers (we use none), and reads in
    1000-byte chunks. Measured on the testbed: an 8 MiB log read took 3.7 s before, 0.26 s after."""

    read_chunk_size = 64 * 1024
    _killed_by_timeout = False

    def respond(self, buffer_) -> None:
        if self.watchers:
            super().respond(buffer_)

    def kill(self) -> None:
        """Only invoke's timeout timer calls this. Mark the timeout *before* closing the channel:
        invoke decides "timed out" by the timer thread having ended, but closing the channel wakes
        the waiting thread while the timer thread is still inside this call, and under load that
        thread won the race and reported the closed channel's exit status -1 instead."""
        self._killed_by_timeout = True
        super().kill()

    @property
    def timed_out(self) -> bool:
        return self._killed_by_timeout or super().timed_out


def _run_kwargs(timeout: float, stdin: bytes | None) -> dict:
    return {
        "hide": True, "warn": True, "pty": False, "timeout": timeout,
        "encoding": _WIRE_ENCODING, "echo_stdin": False,
        "in_stream": _ChunkedStdin(stdin) if stdin is not None else False,
    }


def _wire_bytes(text: str | None) -> bytes:
    return (text or "").encode(_WIRE_ENCODING, errors="replace")


def _raw_from_result(result) -> RawResult:
    return RawResult(result.exited, _wire_bytes(result.stdout), _wire_bytes(result.stderr))


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


def _is_retryable(exc: BaseException) -> bool:
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

