"""Exec channels for SshHosts unit tests: fabric's MockRemote mocks the clients, these the channels.

The fan-out reads channels from one selector (``remote/channels.py``), so a fake channel needs a
real descriptor: a pipe that is readable at once, or never (``hangs``).
"""

from __future__ import annotations

import os
import socket
import threading

from fabric.testing.base import MockRemote, Session


class FakeChannel:
    """The part of a paramiko Channel the fan-out uses; readable at once unless it ``hangs``."""

    def __init__(self, out: bytes = b"", err: bytes = b"", exit: int = 0, hangs: bool = False):
        self._out, self._err, self.exit, self.hangs = out, err, exit, hangs
        self._r, self._w = os.pipe()
        if not hangs:
            os.write(self._w, b"!")
        self.command: str | None = None
        self.stdin = bytearray()
        self.eof_sent = self.closed = False
        self.status_event = threading.Event()
        self.exit_status = -1

    def exec_command(self, command: str) -> None:
        self.command = command

    def setblocking(self, _flag) -> None:
        pass

    def fileno(self) -> int:
        return self._r

    def recv_stderr_ready(self) -> bool:
        return bool(self._err)

    def recv_stderr(self, n: int) -> bytes:
        data, self._err = self._err[:n], self._err[n:]
        return data

    def recv(self, n: int) -> bytes:
        if self._out:
            data, self._out = self._out[:n], self._out[n:]
            return data
        if self.hangs:
            raise socket.timeout()
        self.exit_status = self.exit
        self.status_event.set()
        return b""

    def exit_status_ready(self) -> bool:
        return self.status_event.is_set()

    def send_ready(self) -> bool:
        return True

    def send(self, data: bytes) -> int:
        self.stdin += data
        return len(data)

    def shutdown_write(self) -> None:
        self.eof_sent = True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self._r)
            os.close(self._w)


def channels(remote: MockRemote, *specs: FakeChannel | list[FakeChannel] | None) -> list[FakeChannel]:
    """Session i's exec channels are ``specs[i]`` (one or a list; None: opening one fails later)."""
    made = []
    remote.expect_sessions(*[Session() for _ in specs])
    for session, spec in zip(remote.sessions, specs):
        if spec is None:
            continue
        spec = spec if isinstance(spec, list) else [spec]
        session.client.get_transport.return_value.open_session.side_effect = spec
        made += spec
    return made
