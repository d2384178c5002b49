"""A scripted ``Hosts`` for tests, in the manner of fabric's own ``fabric.testing``.

A test says what each node is expected to be asked and what it answers; the code under test
runs against that script through the real ``Hosts`` methods (``run``, ``put``, ``read_from``,
``run_until_ok``, ``subset``), so decoding, error naming and read parsing are the production
code. Leaving the ``with`` block (or calling ``assert_done``) fails when an expectation was
never met; a command nobody expected raises ``UnexpectedCommand`` at once, naming the node and
the command, and is remembered so ``assert_done`` still fails if the code under test swallowed
the exception.

    with ScriptedHosts(["n0", "n1"]) as hosts:
        hosts.expect("docker rm -f c", exit=1, stderr="No such container: c")  # every node
        hosts.expect(re.compile(r"^docker run "), stdout="c-id\\n", on="n1")      # a pattern
        hosts.allow(lambda cmd: cmd.startswith("mkdir -p "))                   # any number of times
        hosts.expect_put(re.compile(r"/scripts/.*\\.sh$"))                       # an atomic write
        hosts.expect_read(re.compile(r"training\\.log$"), ["line 1\\n", "line 2\\n"], exit_code=0)
        code_under_test(hosts)

A command matcher is the exact text, a compiled pattern (``search``) or a predicate. By default
each node's ``expect`` calls must be met in the order given (fabric's ``Session`` commands);
``ordered=False`` accepts them in any order. ``allow`` is a standing answer, never required.
A scripted log (``expect_read``) answers each read of that file as one poll: the next chunk is
appended first, then the bytes past the reader's offset are sent; the exit-status sidecar shows
``exit_code`` from poll ``exit_after`` on (default: the poll that delivers the last chunk).
A chunk may be a callable (called at that poll, e.g. to set a stop flag) returning the text.
Another ``expect_read`` for the same path takes over when a reader starts again at offset 0
(a rerun job writes a fresh log). ``follow`` serves the same scripts: each node's follower looks
once per poll interval of the script's clock (``clock``/``sleep``: a test may hand in a fake
one), and each look is one poll.
"""

from __future__ import annotations

import re
import shlex
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence, Union

from cvs_tasks.remote.follow import DEFAULT_OPTIONS
from cvs_tasks.remote.hosts import Hosts
from cvs_tasks.remote.results import Node, RawResult
from cvs_tasks.remote.shellcmd import READ_MARKER, read_command

Matcher = Union[str, "re.Pattern[str]", Callable[[str], bool]]
Chunk = Union[str, bytes, Callable[[], Union[str, bytes]]]


class UnexpectedCommand(AssertionError):
    """A node was asked something the script does not hold."""


def answer(stdout: str | bytes = "", stderr: str | bytes = "", exit: int | None = 0, *,
           error: str | None = None, final: bool = False) -> RawResult:
    """A node's raw answer; ``error`` set means the command never finished (exit unknown)."""
    return RawResult(None if error is not None else exit, _bytes(stdout), _bytes(stderr), error, final)


@dataclass(frozen=True)
class Call:
    """One command as a node received it."""

    node: str
    command: str
    stdin: bytes | None


@dataclass
class Expectation:
    node: str
    match: Matcher
    reply: RawResult | Callable[[Call], RawResult]
    times: int | None  # None: a standing answer (allow), any number of times
    stdin: bytes | None = None
    used: int = 0

    def matches(self, call: Call) -> bool:
        if self.stdin is not None and call.stdin != self.stdin:
            return False
        return _matches(self.match, call.command)

    @property
    def open(self) -> bool:
        return self.times is None or self.used < self.times

    def describe(self) -> str:
        return _describe(self.match)


@dataclass
class ScriptedLog:
    """One node's log file, grown by one chunk per read; ``sent`` counts the bytes handed out."""

    node: str
    match: Matcher
    chunks: list[Chunk]
    exit_code: int | None
    exit_after: int
    error: str | None
    complete: bool
    content: bytes = b""
    exists: bool = False
    polls: int = 0
    sent: int = 0
    delivered: int = 0
    paths: set[str] = field(default_factory=set)

    drops: tuple[int, ...] = ()

    def grow(self) -> None:
        """One poll (or one look of a follower): the next chunk is appended."""
        self.polls += 1
        if self.error is None and self.delivered < len(self.chunks):
            chunk = self.chunks[self.delivered]
            self.delivered += 1
            self.content += _bytes(chunk() if callable(chunk) else chunk)
            self.exists = True

    @property
    def status(self) -> int | None:
        """The exit status the job's exit-status file shows now (None: not yet)."""
        return self.exit_code if self.exit_code is not None and self.polls >= self.exit_after else None

    def poll(self, offset: int, max_bytes: int, sidecar: str | None) -> RawResult:
        self.grow()
        if self.error is not None:
            return answer(error=self.error)
        size = str(len(self.content)) if self.exists else "-"
        side = "-"
        if sidecar is not None and self.status is not None:
            side = f"{self.exit_code}\n".encode().hex()
        data = self.content[offset:offset + max_bytes] if self.exists else b""
        self.sent += len(data)
        return answer(f"{READ_MARKER} {size} {side}\n".encode() + data)


class _Book:
    """What every view (``subset``) of one ScriptedHosts shares: the script and the calls."""

    def __init__(self, ordered: bool, clock: Callable[[], float], sleep: Callable[[float], object]) -> None:
        self.ordered = ordered
        self.clock, self.sleep = clock, sleep  # the followers' time (a test may hand in a fake one)
        self.expectations: list[Expectation] = []
        self.logs: list[ScriptedLog] = []
        self.calls: list[Call] = []
        self.unexpected: list[str] = []
        self.reads: dict[str, tuple[str, int, int, str | None]] = {}
        self.lock = threading.RLock()
        self.closed = 0


class ScriptedHosts(Hosts):
    """Nodes that answer from a script; see the module docstring."""

    def __init__(self, nodes: Sequence[str | Node], *, ordered: bool = True,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], object] = time.sleep,
                 _book: _Book | None = None):
        super().__init__([n if isinstance(n, Node) else Node(n, n, rank=i) for i, n in enumerate(nodes)])
        self._book = _book or _Book(ordered, clock, sleep)

    # -- the script ---------------------------------------------------------------------------
    def expect(self, command: Matcher, *, stdout: str | bytes = "", stderr: str | bytes = "",
               exit: int | None = 0, error: str | None = None, final: bool = False,
               reply: Callable[[Call], RawResult] | None = None, stdin: str | bytes | None = None,
               on: str | Sequence[str] | None = None, times: int = 1) -> "ScriptedHosts":
        """``command`` must reach each node in ``on`` (default: every node) ``times`` times."""
        if times < 1:
            raise ValueError("times must be >= 1 (use allow() for a command that may not come)")
        return self._add(command, stdout, stderr, exit, error, final, reply, stdin, on, times)

    def allow(self, command: Matcher, *, stdout: str | bytes = "", stderr: str | bytes = "",
              exit: int | None = 0, error: str | None = None, final: bool = False,
              reply: Callable[[Call], RawResult] | None = None,
              on: str | Sequence[str] | None = None) -> "ScriptedHosts":
        """A standing answer: ``command`` may come any number of times, or never."""
        return self._add(command, stdout, stderr, exit, error, final, reply, None, on, None)

    def expect_put(self, path: Matcher, *, data: str | bytes | None = None, exit: int | None = 0,
                   stderr: str = "", on: str | Sequence[str] | None = None, times: int = 1) -> "ScriptedHosts":
        """An atomic write (``Hosts.put``) to a path matching ``path``, with ``data`` if given."""
        def is_put(command: str) -> bool:
            target = put_target(command)
            return target is not None and _matches(path, target)

        is_put.__doc__ = f"put to {_describe(path)}"
        return self._add(is_put, "", stderr, exit, None, False, None, data, on, times)

    def expect_read(self, path: Matcher, chunks: Sequence[Chunk] = (), *, exit_code: int | None = None,
                    exit_after: int | None = None, error: str | None = None, complete: bool = True,
                    drops: Sequence[int] = (), on: str | Sequence[str] | None = None) -> list[ScriptedLog]:
        """A log file read with ``read_from`` or followed (``follow``): chunk i is appended at poll
        i+1 (see module doc).

        ``complete`` (default) requires every chunk to be read; ``error`` fails every read and
        every follower start; a follower dies at each poll number in ``drops`` (after that poll's
        chunk was appended, before it was sent)."""
        made = []
        with self._book.lock:
            for node in self._targets(on):
                log = ScriptedLog(node, path, list(chunks), exit_code,
                                  exit_after if exit_after is not None else max(1, len(chunks)),
                                  error, complete, drops=tuple(drops))
                self._book.logs.append(log)
                made.append(log)
        return made

    # -- what happened ------------------------------------------------------------------------
    @property
    def calls(self) -> list[Call]:
        return list(self._book.calls)

    def commands(self, node: str) -> list[str]:
        """Every command ``node`` received, in order (reads included)."""
        return [c.command for c in self._book.calls if c.node == node]

    def written(self, node: str) -> dict[str, bytes]:
        """Path -> data of every successful-or-not ``put`` to ``node``, the last write winning."""
        return {put_target(c.command): c.stdin or b"" for c in self._book.calls
                if c.node == node and put_target(c.command) is not None}

    @property
    def closed(self) -> int:
        return self._book.closed

    def unmet(self) -> list[str]:
        """What the script expected and did not get, and what came that nobody expected."""
        book = self._book
        out = list(book.unexpected)
        for e in book.expectations:
            if e.times is not None and e.used < e.times:
                out.append(f"node {e.node}: expected {e.describe()} {e.times} time(s), got it {e.used}")
        for log in book.logs:
            if log.complete and (log.polls == 0 or log.delivered < len(log.chunks)):
                out.append(f"node {log.node}: log {_describe(log.match)}: read {log.polls} time(s), "
                           f"{len(log.chunks) - log.delivered} of {len(log.chunks)} chunk(s) never read")
        return out

    def assert_done(self) -> None:
        problems = self.unmet()
        if problems:
            raise AssertionError("scripted hosts: " + "; ".join(problems) if len(problems) == 1
                                 else "scripted hosts:\n  " + "\n  ".join(problems))

    def __exit__(self, exc_type, *rest) -> None:
        self.close()
        if exc_type is None:
            self.assert_done()

    # -- Hosts --------------------------------------------------------------------------------
    def subset(self, indices):
        return ScriptedHosts([self.nodes[i] for i in indices], _book=self._book)

    def close(self) -> None:
        self._book.closed += 1

    def read_from(self, paths, offsets, max_bytes, *, sidecars=None, timeout):
        keys = []
        with self._book.lock:  # remember which commands are reads, and of what
            for i, (path, offset) in enumerate(zip(paths, offsets)):
                side = sidecars[i] if sidecars is not None and i < len(sidecars) else None
                if offset >= 0 and max_bytes >= 4:
                    keys.append(read_command(path, offset, max_bytes, side))
                    self._book.reads[keys[-1]] = (path, offset, max_bytes, side)
        try:
            return super().read_from(paths, offsets, max_bytes, sidecars=sidecars, timeout=timeout)
        finally:
            with self._book.lock:
                for key in keys:
                    self._book.reads.pop(key, None)

    def follow(self, targets, options=DEFAULT_OPTIONS):
        """Followers over the scripted logs (``remote/testing_follow.py``), on this script's clock."""
        from cvs_tasks.remote.testing_follow import ScriptedFollow

        return ScriptedFollow(self, targets, options)

    @staticmethod
    def _call(node: str, command: str) -> "Call":
        """A call as the book records it (for the followers in ``testing_follow.py``, which cannot import it)."""
        return Call(node, command, None)

    def _exec_many(self, commands, stdins, timeout):
        return [self._answer(Call(node.name, command, stdin))
                for node, command, stdin in zip(self.nodes, commands, stdins)]

    # -- inside -------------------------------------------------------------------------------
    def _answer(self, call: Call) -> RawResult:
        book = self._book
        with book.lock:
            book.calls.append(call)
            read = book.reads.get(call.command)
            if read is not None:
                log = self._log_for(call.node, read[0], read[1])
                if log is not None:
                    return log.poll(read[1], read[2], read[3])
                return self._unexpected(call, f"a read of {read[0]}")
            mine = [e for e in book.expectations if e.node == call.node]
            chosen = None
            pending = [e for e in mine if e.times is not None and e.open]
            if pending and (not book.ordered or pending[0].matches(call)):
                chosen = next((e for e in pending if e.matches(call)), None)
            if chosen is None:
                chosen = next((e for e in mine if e.times is None and e.matches(call)), None)
            if chosen is None:
                hint = f"; next expected: {pending[0].describe()}" if pending else ""
                target = put_target(call.command)
                what = (f"a put of {target} ({len(call.stdin or b'')} bytes)" if target is not None
                        else _short(call.command))
                return self._unexpected(call, what, hint)
            chosen.used += 1
        return chosen.reply(call) if callable(chosen.reply) else chosen.reply

    def _log_for(self, node: str, path: str, offset: int) -> ScriptedLog | None:
        """The script serving ``path``: the one already read, until a reader starts again at
        offset 0 and a later script for the same path was never read (a rerun's fresh log)."""
        mine = [log for log in self._book.logs if log.node == node and _matches(log.match, path)]
        current = next((log for log in mine if path in log.paths), None)
        fresh = next((log for log in mine if log.polls == 0 and log is not current), None)
        if current is None or (offset == 0 and fresh is not None and mine.index(fresh) > mine.index(current)):
            current = fresh if current is not None else (mine[0] if mine else None)
            for log in mine:
                log.paths.discard(path)
            if current is not None:
                current.paths.add(path)
        return current

    def _unexpected(self, call: Call, what: str, hint: str = "") -> RawResult:
        message = f"node {call.node}: unexpected command: {what}{hint}"
        self._book.unexpected.append(message)
        raise UnexpectedCommand(message)

    def _targets(self, on: str | Sequence[str] | None) -> list[str]:
        names = self.names
        wanted = names if on is None else [on] if isinstance(on, str) else list(on)
        unknown = [n for n in wanted if n not in names]
        if unknown:
            raise ValueError(f"no node {unknown[0]!r} in this script (nodes: {', '.join(names)})")
        return wanted

    def _add(self, command, stdout, stderr, exit, error, final, reply, stdin, on, times) -> "ScriptedHosts":
        result = reply or answer(stdout, stderr, exit, error=error, final=final)
        with self._book.lock:
            for node in self._targets(on):
                self._book.expectations.append(
                    Expectation(node, command, result, times, None if stdin is None else _bytes(stdin)))
        return self


def put_target(command: str) -> str | None:
    """The destination of a ``put_command``, or None for any other command."""
    if not command.startswith("umask 077 && ") or " mv -f " not in command or " || {" not in command:
        return None
    tail = command.rsplit(" mv -f ", 1)[1].split(" || {", 1)[0]
    try:
        words = shlex.split(tail)
    except ValueError:
        return None
    return words[-1] if len(words) == 2 else None


def _matches(matcher: Matcher, text: str) -> bool:
    if isinstance(matcher, str):
        return text == matcher
    if isinstance(matcher, re.Pattern):
        return matcher.search(text) is not None
    return bool(matcher(text))


def _describe(matcher: Matcher) -> str:
    if isinstance(matcher, str):
        return f"`{_short(matcher)}`"
    if isinstance(matcher, re.Pattern):
        return f"/{matcher.pattern}/"
    return (matcher.__doc__ or getattr(matcher, "__name__", "a predicate")).strip()


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _bytes(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)
