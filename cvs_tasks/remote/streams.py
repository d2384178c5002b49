"""``StreamFollow``: every node's follower as a readable byte stream, served by one selector loop.

An SSH exec channel and a subprocess's stdout pipe differ only in how they are started and read
(``FollowerStream``); framing, offsets, silence, pokes and restarts are written once here. The
loop runs in the consumer's own thread inside ``events``: no thread per node, no command per
poll. Opening a stream is the transport's ``opener``; it raises ``FollowerStartError`` (or
anything) when the follower cannot start, which becomes a ``Lost`` for that node.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable, Sequence

from cvs_tasks.remote.follow import Delta, Exited, Follow, FollowEvent, FollowOptions, FollowTarget, Lost
from cvs_tasks.remote.follower import FollowerArgs
from cvs_tasks.remote.frames import BeatFrame, DataFrame, ErrorFrame, ExitFrame, FrameDecoder, FrameError
from cvs_tasks.remote.results import Node, node_error

READ_CHUNK = 256 * 1024
STDERR_KEEP = 2048
SILENCE_CHECK_S = 1.0  # how often every node's silence is looked at (limits are tens of seconds)
START_GRACE_S = 60.0  # a follower's first word may take this long (a loaded node starting many sessions)


def read_tail(fd: int, tail: bytes, keep: int = STDERR_KEEP) -> bytes:
    """``tail`` followed by what the non-blocking ``fd`` holds now, cut to its last ``keep`` bytes.

    A follower's stderr is read only to say why it ended: its last lines are what the user needs,
    and keeping just those bounds the memory a noisy follower can take. Stops at EOF, at "nothing
    to read yet" and at a descriptor already closed."""
    while True:
        try:
            chunk = os.read(fd, READ_CHUNK)
        except (BlockingIOError, OSError, ValueError):
            return tail
        if not chunk:
            return tail
        tail = (tail + chunk)[-keep:]


class FollowerStartError(RuntimeError):
    """The follower could not be started (no connection, no channel): the reason, for the user."""


class SharedSource(ABC):
    """One descriptor carrying several nodes' followers (one Slurm step's merged output): selected
    on once, it feeds the streams of those nodes (their ``source``)."""

    @abstractmethod
    def fileno(self) -> int:
        """Readable when any of its followers wrote something, or it ended."""

    @abstractmethod
    def pump(self) -> list[int]:
        """Read what arrived, without blocking; the node indices whose streams now have news."""

    @property
    @abstractmethod
    def closed(self) -> bool:
        """Nothing more will come from it: stop selecting on it."""


class FollowerStream(ABC):
    """One running follower, seen from the harness."""

    source: SharedSource | None = None  # set: its bytes arrive through that source, not its own fileno

    @abstractmethod
    def fileno(self) -> int:
        """A descriptor that becomes readable when the follower wrote something or ended
        (not asked of a stream that has a ``source``)."""

    @abstractmethod
    def read(self) -> tuple[bytes, bool]:
        """What the follower wrote since the last call, without blocking; True once it ended."""

    @abstractmethod
    def poke(self) -> None:
        """Ask the follower to look at its node now (a line on its standard input)."""

    @abstractmethod
    def why_ended(self) -> str:
        """After ``read`` said it ended: how (exit status, signal, dropped connection, stderr)."""

    @abstractmethod
    def close(self) -> None:
        """Stop the follower; safe to call twice."""


Opener = Callable[[int, FollowerArgs], FollowerStream]
# starts many followers at once (e.g. through a transport's fan-out window); a stream or the error per job
StartAll = Callable[[Opener, Sequence[tuple[int, FollowerArgs]]], Sequence["FollowerStream | Exception"]]


def _one_by_one(opener: Opener, jobs: Sequence[tuple[int, FollowerArgs]]) -> list["FollowerStream | Exception"]:
    out: list[FollowerStream | Exception] = []
    for index, args in jobs:
        try:
            out.append(opener(index, args))
        except Exception as exc:  # noqa: BLE001 - every failure to start is this node's Lost
            out.append(exc)
    return out


@dataclass
class _Node:
    target: FollowTarget
    stream: FollowerStream | None = None
    decoder: FrameDecoder | None = None
    next_offset: int = 0
    heard: float = 0.0
    unanswered: int = 0  # pokes sent that the follower has not answered yet
    talked: bool = False  # it said something since it started
    done: bool = False  # exited: nothing more will come
    queued: list[FollowEvent] = field(default_factory=list)


class StreamFollow(Follow):
    """Followers started through ``opener``, one per target, read from one selector."""

    def __init__(self, nodes: Sequence[Node], targets: Sequence[FollowTarget], options: FollowOptions,
                 opener: Opener, *, pokeable: bool = True, clock: Callable[[], float] = time.monotonic,
                 start_all: StartAll | None = None):
        if len(nodes) != len(targets):
            raise ValueError(f"follow needs one target per node ({len(nodes)}), got {len(targets)}")
        self.options = options
        self._labels = list(nodes)
        self._opener = opener
        self._pokeable = pokeable
        self._clock = clock
        self._selector = selectors.DefaultSelector()
        self._nodes = [_Node(t) for t in targets]
        self._queued: list[FollowEvent] = []
        self._sources: set[SharedSource] = set()
        self._next_silence_check = 0.0  # a scan of every node: once a second, not once per wake-up
        jobs = [(index, self._args(index, target.offset)) for index, target in enumerate(targets)]
        for (index, args), opened in zip(jobs, (start_all or _one_by_one)(opener, jobs)):
            self._take(index, args.offset, opened)

    # -- Follow ---------------------------------------------------------------------------
    def events(self, timeout: float) -> list[FollowEvent]:
        deadline = self._clock() + max(0.0, timeout)
        while True:
            out = self._step(deadline)
            if out or self._clock() >= deadline:
                return out

    def drain(self, timeout: float) -> list[FollowEvent]:
        deadline = self._clock() + max(0.0, timeout)
        out: list[FollowEvent] = []
        asked = []
        for index, node in enumerate(self._nodes):
            if node.stream is not None and self._pokeable:
                try:
                    node.stream.poke()
                except OSError:
                    continue  # a follower that cannot be poked ends soon; its end is an event
                node.unanswered += 1
                asked.append(index)
        while True:
            waiting = [i for i in asked if self._nodes[i].unanswered and self._nodes[i].stream is not None]
            if not waiting or self._clock() >= deadline:
                return out + self._step(self._clock())  # and whatever else is already there
            out += self._step(deadline)  # one wait: an answer (which is no event) ends it too

    def _step(self, deadline: float) -> list[FollowEvent]:
        """One wait on the selector (at most until ``deadline``) and what it brought."""
        out, self._queued = self._queued, []
        wait = 0.0 if out else max(0.0, min(deadline - self._clock(), self.options.silence_s))
        for key, _ in self._selector.select(wait):  # with nothing registered this just waits
            if isinstance(key.data, SharedSource):
                for index in key.data.pump():
                    self._read(index, out)
                self._forget_closed_sources()
            else:
                self._read(key.data, out)
        self._check_silence(out)
        return out

    def restart(self, index: int, offset: int) -> None:
        self._stop(index)
        self._nodes[index].done = False
        self._start(index, offset)

    def close(self) -> None:
        for index in range(len(self._nodes)):
            self._stop(index)
        self._selector.close()

    # -- inside ---------------------------------------------------------------------------
    def _args(self, index: int, offset: int) -> FollowerArgs:
        o, target = self.options, self._nodes[index].target
        return FollowerArgs(target.path, target.exit_path, offset, o.poll_s, o.frame_bytes, o.heartbeat_s,
                            pokeable=self._pokeable)

    def _start(self, index: int, offset: int) -> None:
        self._take(index, offset, _one_by_one(self._opener, [(index, self._args(index, offset))])[0])

    def _take(self, index: int, offset: int, opened: "FollowerStream | Exception") -> None:
        """Register a started follower's stream, or report why it did not start."""
        node, o = self._nodes[index], self.options
        if isinstance(opened, Exception):
            self._queued.append(Lost(index, self._error(index, f"cannot start the follower: {opened}")))
            return
        stream = opened
        node.stream, node.decoder = stream, FrameDecoder(o.frame_bytes)
        node.next_offset, node.heard, node.unanswered, node.talked = offset, self._clock(), 0, False
        if stream.source is None:
            self._selector.register(stream.fileno(), selectors.EVENT_READ, index)
        elif stream.source not in self._sources:
            self._sources.add(stream.source)
            self._selector.register(stream.source.fileno(), selectors.EVENT_READ, stream.source)

    def _stop(self, index: int) -> None:
        node = self._nodes[index]
        if node.stream is None:
            return
        if node.stream.source is None:
            try:
                self._selector.unregister(node.stream.fileno())
            except (KeyError, ValueError, OSError):
                pass
        node.stream.close()
        node.stream, node.decoder, node.unanswered = None, None, 0
        self._forget_closed_sources()

    def _forget_closed_sources(self) -> None:
        for source in [s for s in self._sources if s.closed]:
            self._sources.discard(source)
            try:
                self._selector.unregister(source.fileno())
            except (KeyError, ValueError, OSError):
                pass

    def _read(self, index: int, out: list[FollowEvent]) -> None:
        node = self._nodes[index]
        if node.stream is None or node.decoder is None:
            return
        data, ended = node.stream.read()
        if data:
            node.heard, node.talked = self._clock(), True
            try:
                frames = node.decoder.feed(data)
            except FrameError as exc:
                self._lose(index, f"garbled follower output ({exc})", out)
                return
            for frame in frames:
                if not self._apply(index, frame, out):
                    return
        if ended:
            self._lose(index, f"the follower ended: {node.stream.why_ended()}", out)

    def _apply(self, index: int, frame, out: list[FollowEvent]) -> bool:
        """Turn one frame into events; False once the stream is over."""
        node = self._nodes[index]
        if isinstance(frame, DataFrame):
            if frame.offset != node.next_offset:
                self._lose(index, f"the follower sent bytes from offset {frame.offset}, expected "
                                  f"{node.next_offset}", out)
                return False
            node.next_offset += len(frame.data)
            if frame.data:
                out.append(Delta(index, frame.offset, frame.data))
            return True
        if isinstance(frame, ExitFrame):
            out.append(Exited(index, frame.code, frame.size))
            node.done = True
            self._stop(index)
            return False
        if isinstance(frame, BeatFrame):
            if frame.answer:
                node.unanswered = max(0, node.unanswered - 1)
            return True
        if isinstance(frame, ErrorFrame):
            self._lose(index, frame.text, out)
            return False
        raise AssertionError(f"unknown frame {frame!r}")

    def _check_silence(self, out: list[FollowEvent]) -> None:
        now = self._clock()
        if now < self._next_silence_check:
            return
        self._next_silence_check = now + SILENCE_CHECK_S
        silence = self.options.silence_s
        started = max(silence, START_GRACE_S)
        for index, node in enumerate(self._nodes):
            if node.stream is not None and now - node.heard > (silence if node.talked else started):
                self._lose(index, f"no word from the follower for {now - node.heard:.0f}s (the node or its "
                                  "connection hangs)", out)

    def _lose(self, index: int, message: str, out: list[FollowEvent]) -> None:
        self._stop(index)
        out.append(Lost(index, self._error(index, message)))

    def _error(self, index: int, message: str) -> str:
        return node_error(self._labels[index], f"following {self._nodes[index].target.path}: {message}")


class PipeStream(FollowerStream):
    """A follower in a subprocess on this machine: its stdout is the stream, its stdin the poke line."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None):
        try:
            self.proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True, env=env)
        except OSError as exc:
            raise FollowerStartError(f"cannot start {argv[0]}: {exc.strerror or exc}") from None
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._out, self._err = self.proc.stdout.fileno(), self.proc.stderr.fileno()
        os.set_blocking(self._out, False)
        os.set_blocking(self._err, False)
        self._stderr = b""
        self._closed = False

    def fileno(self) -> int:
        return self._out

    def read(self) -> tuple[bytes, bool]:
        self._read_stderr()
        chunks, ended = [], False
        while True:
            try:
                chunk = os.read(self._out, READ_CHUNK)
            except BlockingIOError:
                break
            if not chunk:
                ended = True
                break
            chunks.append(chunk)
        return b"".join(chunks), ended

    def poke(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"\n")
        self.proc.stdin.flush()

    def why_ended(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "its output closed but it is still running"
        self._read_stderr()
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        detail = self._stderr.decode("utf-8", "replace").strip().splitlines()
        return how + (f": {detail[-1][:300]}" if detail else "")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def _read_stderr(self) -> None:
        self._stderr = read_tail(self._err, self._stderr)
