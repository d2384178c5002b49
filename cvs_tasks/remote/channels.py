"""Raw paramiko exec channels on an open connection, read without a thread of their own.

A paramiko channel's ``fileno()`` becomes readable when data, stderr or the end arrive, so one
``selectors`` loop serves any number of them: ``run_channels`` reads every node's command to its
end (per-command timeout, stdin, exit status), ``ChannelStream`` is a node's follower over SSH.
No thread per node here, nor per connection (``remote/reactor.py`` reads every connection's packets).
"""

from __future__ import annotations

import selectors
import socket
import time
from dataclasses import dataclass, field
from typing import Callable

import paramiko

from cvs_tasks.remote.results import RawResult
from cvs_tasks.remote.streams import READ_CHUNK, STDERR_KEEP, FollowerStartError, FollowerStream

EXIT_STATUS_WAIT_S = 2.0  # after the end of output, how long the exit status may take to follow
STDIN_CHUNK = 64 * 1024
POLL_BUSY_S = 0.005  # while stdin is being sent or an exit status is due (neither wakes a selector)


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


@dataclass
class Started:
    """A command whose exec request the node accepted: its channel, stdin, and when it started."""

    channel: paramiko.Channel
    stdin: bytes | None
    started: float


@dataclass
class _Running:
    job: Started
    deadline: float
    sent: int = 0
    out: list[bytes] = field(default_factory=list)
    err: list[bytes] = field(default_factory=list)
    ended: bool = False  # stdout's end arrived; the exit status follows

    @property
    def writing(self) -> bool:
        return self.job.stdin is not None and self.sent < len(self.job.stdin) and not self.ended

    def write_some(self) -> None:
        """Send stdin as far as the channel's window allows now; EOF once it is all sent."""
        channel, data = self.job.channel, self.job.stdin
        try:
            while data is not None and self.sent < len(data) and channel.send_ready():
                sent = channel.send(data[self.sent:self.sent + STDIN_CHUNK])
                if not sent:
                    break
                self.sent += sent
            if data is None or self.sent >= len(data):
                channel.shutdown_write()
        except (socket.timeout, OSError, EOFError, paramiko.SSHException):
            self.sent = len(data or b"")  # the command stopped reading: what it did not take is not sent


def run_channels(jobs: dict[int, Started], timeout: float,
                 clock: Callable[[], float] = time.monotonic) -> dict[int, RawResult]:
    """Every started command to its end (or its timeout, counted from its own start), read from
    one selector in the caller's thread; a result per index, never an exception."""
    selector = selectors.DefaultSelector()
    running: dict[int, _Running] = {}
    results: dict[int, RawResult] = {}
    for index, job in jobs.items():
        job.channel.setblocking(False)
        run = _Running(job, job.started + timeout)
        run.write_some()
        selector.register(job.channel.fileno(), selectors.EVENT_READ, index)
        running[index] = run
    try:
        while running:
            now = clock()
            for index, run in list(running.items()):
                if run.writing:
                    run.write_some()
                channel = run.job.channel
                if run.ended and channel.exit_status_ready():
                    results[index] = _finished(run)
                elif now >= run.deadline:
                    results[index] = RawResult(None, b"".join(run.out), b"".join(run.err),
                                               f"command timed out after {timeout:g}s")
                else:
                    continue
                del running[index]
                _unregister(selector, channel)
                channel.close()
            if not running:
                break
            busy = any(r.writing or r.ended for r in running.values())
            wait = POLL_BUSY_S if busy else max(0.0, min(r.deadline for r in running.values()) - clock())
            for key, _ in selector.select(wait):
                run = running[key.data]
                out, err, ended = drain_channel(run.job.channel)
                run.out.append(out)
                run.err.append(err)
                if ended:
                    run.ended = True
                    _unregister(selector, run.job.channel)  # its descriptor stays readable from now on
    finally:
        for run in running.values():
            run.job.channel.close()
        selector.close()
    return results


def _finished(run: _Running) -> RawResult:
    out, err = b"".join(run.out), b"".join(run.err)
    status = run.job.channel.exit_status
    if status is None or status < 0:
        return RawResult(None, out, err, "the SSH channel closed without an exit status (connection dropped?)")
    return RawResult(status, out, err)


def _unregister(selector: selectors.BaseSelector, channel: paramiko.Channel) -> None:
    try:
        selector.unregister(channel.fileno())
    except (KeyError, ValueError, OSError):
        pass
