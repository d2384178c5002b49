"""Raw paramiko exec channels on an open connection, read without a thread of their own.

A paramiko channel's ``fileno()`` becomes readable when data, stderr or the end arrive, so one
``selectors`` loop serves any number of them: ``ChannelStream`` is a node's follower over SSH.
"""

from __future__ import annotations

import socket

import paramiko

from cvs_tasks.remote.streams import READ_CHUNK, STDERR_KEEP, FollowerStartError, FollowerStream

EXIT_STATUS_WAIT_S = 2.0  # after the end of output, how long the exit status may take to follow


def drain_channel(channel: paramiko.Channel) -> tuple[bytes, bytes, bool]:
    """Everything a non-blocking channel holds now: stdout, stderr, and whether stdout ended."""
    out, err, ended = [], [], False
    while channel.recv_stderr_ready():
        err.append(channel.recv_stderr(READ_CHUNK))
    while True:
        try:
            chunk = channel.recv(READ_CHUNK)
        except socket.timeout:
            break
        if not chunk:
            ended = True
            break
        out.append(chunk)
    while channel.recv_stderr_ready():
        err.append(channel.recv_stderr(READ_CHUNK))
    return b"".join(out), b"".join(err), ended


class ChannelStream(FollowerStream):
    """A follower started by an exec request on the node's open SSH connection."""

    def __init__(self, transport: paramiko.Transport | None, command: str, timeout: float):
        if transport is None or not transport.is_active():
            raise FollowerStartError("the SSH connection is not open")
        try:
            channel = transport.open_session(timeout=timeout)
            channel.exec_command(command)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise FollowerStartError(f"ssh error: {exc}") from None
        channel.setblocking(False)
        self.channel = channel
        self._fd = channel.fileno()
        self._stderr = b""

    def fileno(self) -> int:
        return self._fd

    def read(self) -> tuple[bytes, bool]:
        out, err, ended = drain_channel(self.channel)
        if err:
            self._stderr = (self._stderr + err)[-STDERR_KEEP:]
        return out, ended

    def poke(self) -> None:
        try:
            self.channel.send(b"\n")
        except socket.timeout:
            pass  # the window is full of pokes already: one is enough

    def why_ended(self) -> str:
        channel = self.channel
        if not channel.status_event.wait(EXIT_STATUS_WAIT_S) or channel.exit_status < 0:
            transport = channel.get_transport()
            if transport is None or not transport.is_active():
                return "the SSH connection dropped"
            return "its channel closed without an exit status"
        signal = getattr(channel, "exit_signal", None)
        how = f"exit status {channel.exit_status}" + (f" (signal {signal})" if signal else "")
        detail = self._stderr.decode("utf-8", "replace").strip().splitlines()
        return how + (f": {detail[-1][:300]}" if detail else "")

    def close(self) -> None:
        try:
            self.channel.close()
        except Exception:  # noqa: BLE001 - closing a broken channel must not mask anything
            pass
