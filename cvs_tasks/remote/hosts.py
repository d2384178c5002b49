"""The ``Hosts`` interface: run, put and read on every node at once, one result per node.

Implementations only provide ``_exec_many`` (one command and optional stdin per node, raw
bytes back) and, where they can, ``_follower_opener`` (how a node's log follower is started as a
stream); the shared behaviour (decoding, error naming, atomic put, incremental reads, log
followers, retries of failed nodes) lives here once, so SSH and local nodes behave the same.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from typing import Callable, Sequence

from cvs_tasks.remote.follow import DEFAULT_OPTIONS, Follow, FollowOptions, FollowTarget
from cvs_tasks.remote.follow_poll import PollingFollow
from cvs_tasks.remote.results import Node, NodeResult, RawResult, ReadResult, node_error, to_node_result
from cvs_tasks.remote.retry import Attempt, RetryPolicy
from cvs_tasks.remote.shellcmd import parse_read_output, put_command, read_command
from cvs_tasks.remote.streams import Opener, StartAll, StreamFollow


class Hosts(ABC):
    """A fixed, ordered set of nodes (index = rank); every call fans out to all of them."""

    def __init__(self, nodes: Sequence[Node]):
        self.nodes: list[Node] = list(nodes)
        self._attempts: list[Attempt] = []

    @property
    def attempts(self) -> list[Attempt]:
        """Failed connection attempts so far (transport retries), for the run record."""
        return self._attempts

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def __len__(self) -> int:
        return len(self.nodes)

    def __enter__(self) -> "Hosts":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- what an implementation provides -------------------------------------------------
    @abstractmethod
    def _exec_many(self, commands: Sequence[str], stdins: Sequence[bytes | None],
                   timeout: float) -> list[RawResult]:
        """Run commands[i] on node i with stdins[i]; never raise for a node's failure."""

    @abstractmethod
    def subset(self, indices: Sequence[int]) -> "Hosts":
        """A view on some nodes (same connections; closing the view closes nothing)."""

    def close(self) -> None:  # noqa: B027 - no-op on purpose; implementations that hold connections override it
        """Release connections; safe to call twice."""

    # --- what the harness expects a node to say, for hosts that ask no node (remote/dryrun.py) ----
    def answer(self, holding: str, stdout: str) -> None:  # noqa: B027 - real nodes answer for themselves
        """A node asked a command holding ``holding`` would say ``stdout``. Hosts that run commands
        ignore this; ``DryRunHosts`` answers so, where a stage needs an answer to go on."""

    def assume(self, value: str, rule: str) -> None:  # noqa: B027 - real nodes answer for themselves
        """``value`` is a guess at what only a node can tell, resolved at run time by ``rule``. Hosts that
        run commands ignore this; ``DryRunHosts`` ends every line holding ``value`` with the rule."""

    def _follower_opener(self) -> Opener | None:
        """How this transport starts a node's follower as a stream (``remote/streams.py``);
        None: it cannot, and ``follow`` falls back to one read per node per poll."""
        return None

    # --- the contract ---------------------------------------------------------------------
    def run(self, command: str | Sequence[str], *, timeout: float,
            stdin: str | bytes | None = None) -> list[NodeResult]:
        """Run one command everywhere (str) or command i on node i (list); results in rank order."""
        commands = self._per_node(command)
        data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
        raws = self._exec_many(commands, [data] * len(self.nodes), timeout)
        return [to_node_result(n, r) for n, r in zip(self.nodes, raws)]

    def put(self, data: bytes, path: str, mode: int = 0o600, *, timeout: float) -> list[NodeResult]:
        """Write ``data`` to ``path`` on every node atomically with ``mode`` (content via stdin)."""
        command = put_command(path, mode)
        raws = self._exec_many([command] * len(self.nodes), [bytes(data)] * len(self.nodes), timeout)
        return [to_node_result(n, r, what=f"writing {path}") for n, r in zip(self.nodes, raws)]

    def put_each(self, files: Sequence[tuple[bytes, str]], mode: int = 0o600, *,
                 timeout: float) -> list[NodeResult]:
        """Node i gets ``files[i]`` (data, path), atomically with ``mode``: one fan-out for every
        node's own file, where a ``put`` per file would send each file to every node (N² commands)."""
        if len(files) != len(self.nodes):
            raise ValueError(f"put_each needs one file per node ({len(self.nodes)}), got {len(files)}")
        raws = self._exec_many([put_command(path, mode) for _, path in files], [bytes(d) for d, _ in files],
                               timeout)
        return [to_node_result(n, r, what=f"writing {path}") for n, r, (_, path) in zip(self.nodes, raws, files)]

    def read_from(self, paths: Sequence[str], offsets: Sequence[int], max_bytes: int, *,
                  sidecars: Sequence[str] | None = None, timeout: float) -> list[ReadResult]:
        """Read what each node's file gained past its offset: one round trip per node.

        The new offset advances by the bytes received (a UTF-8 character cut by ``max_bytes``
        is left for the next read), never by the decoded length.
        """
        count = len(self.nodes)
        if len(paths) != count or len(offsets) != count:
            raise ValueError(f"read_from needs one path and one offset per node ({count})")
        if sidecars is not None and len(sidecars) != count:
            raise ValueError(f"read_from needs one sidecar per node ({count}) or none")
        commands = [read_command(p, o, max_bytes, sidecars[i] if sidecars else None)
                    for i, (p, o) in enumerate(zip(paths, offsets))]
        raws = self._exec_many(commands, [None] * count, timeout)
        return [_read_result(n, r, p, o) for n, r, p, o in zip(self.nodes, raws, paths, offsets)]

    def follow(self, targets: Sequence[FollowTarget], options: FollowOptions = DEFAULT_OPTIONS) -> Follow:
        """One long-lived follower per node for a job's logs (``remote/follow.py``): ``targets[i]``
        on node i, all read from one loop in the caller's thread."""
        opener = self._follower_opener()
        if opener is None:
            return PollingFollow(self, targets, options)
        return StreamFollow(self.nodes, targets, options, opener, start_all=self._follower_start_all())

    def _follower_start_all(self) -> StartAll | None:
        """How many followers are started at once (None: one after the other)."""
        return None

    # --- helpers for callers --------------------------------------------------------------
    def run_until_ok(self, command: str | Sequence[str], *, timeout: float, step: str,
                     policy: RetryPolicy, record: list[Attempt],
                     ok: Callable[[NodeResult], bool] | None = None,
                     stdin: str | bytes | None = None,
                     sleep: Callable[[float], None] = time.sleep) -> list[NodeResult]:
        """Run, then re-run only on the nodes that failed, up to ``policy.attempts`` rounds.

        ``ok`` judges a node's result (default: exit 0). Every round that leaves failures is
        recorded as one Attempt naming the failing nodes.
        """
        judge = ok or (lambda r: r.ok)
        commands = self._per_node(command)
        results: list[NodeResult] = []
        pending = list(range(len(self.nodes)))
        for attempt in range(1, policy.attempts + 1):
            started = time.monotonic()
            view = self if attempt == 1 else self.subset(pending)
            answers = view.run([commands[i] for i in pending], timeout=timeout, stdin=stdin)
            if attempt == 1:
                results = answers
            else:
                for i, answer in zip(pending, answers):
                    results[i] = answer
            pending = [i for i in pending if not judge(results[i])]
            if not pending:
                break
            if all(results[i].final for i in pending):  # key or auth refused: asking again cannot help
                record.append(Attempt(step, attempt, "; ".join(results[i].error or "" for i in pending),
                                      round(time.monotonic() - started, 3)))
                break
            reason = "; ".join(results[i].error or f"node {self.nodes[i].label}: rejected"
                               for i in pending)
            record.append(Attempt(step, attempt, reason, round(time.monotonic() - started, 3)))
            if attempt < policy.attempts:
                sleep(policy.delay(attempt))
        return results

    def _per_node(self, command: str | Sequence[str]) -> list[str]:
        if isinstance(command, str):
            return [command] * len(self.nodes)
        commands = list(command)
        if len(commands) != len(self.nodes):
            raise ValueError(f"got {len(commands)} commands for {len(self.nodes)} nodes")
        return commands


def _read_result(node: Node, raw: RawResult, path: str, offset: int) -> ReadResult:
    base = to_node_result(node, raw, what=f"reading {path}")
    if not base.ok:
        return ReadResult(node.name, node.rank, "", offset, None, None, base.error)
    try:
        parsed = parse_read_output(raw.stdout)
    except ValueError as exc:
        return ReadResult(node.name, node.rank, "", offset, None, None, node_error(node, str(exc)))
    if parsed.size is not None and parsed.size < offset:
        message = (f"{path} shrank to {parsed.size} bytes below the read offset {offset} "
                   "(truncated or replaced)")
        return ReadResult(node.name, node.rank, "", offset, parsed.size, parsed.sidecar,
                          node_error(node, message))
    return ReadResult(node.name, node.rank, parsed.data, offset + parsed.consumed, parsed.size,
                      parsed.sidecar, None)


class CompositeHosts(Hosts):
    """Nodes served by several transports (e.g. the harness machine plus SSH nodes)."""

    def __init__(self, parts: Sequence[tuple[Hosts, Sequence[int]]], nodes: Sequence[Node]):
        super().__init__(nodes)
        self._parts = [(hosts, list(indices)) for hosts, indices in parts]
        covered = sorted(i for _, idx in self._parts for i in idx)
        if covered != list(range(len(self.nodes))):
            raise ValueError("composite parts must cover every node exactly once")

    def _exec_many(self, commands, stdins, timeout):
        out: list[RawResult | None] = [None] * len(self.nodes)

        def work(hosts: Hosts, indices: list[int]) -> None:
            raws = hosts._exec_many([commands[i] for i in indices], [stdins[i] for i in indices],
                                    timeout)
            for i, raw in zip(indices, raws):
                out[i] = raw

        threads = [threading.Thread(target=work, args=part, daemon=True) for part in self._parts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return [raw if raw is not None else RawResult(None, b"", b"", "transport thread crashed")
                for raw in out]

    def subset(self, indices):
        wanted = list(indices)
        parts = []
        for hosts, own in self._parts:
            local = [own.index(i) for i in wanted if i in own]
            if local:
                parts.append((hosts.subset(local), [wanted.index(own[j]) for j in local]))
        return CompositeHosts(parts, [self.nodes[i] for i in wanted])

    @property
    def attempts(self) -> list[Attempt]:
        return [a for hosts, _ in self._parts for a in hosts.attempts]

    def _follower_opener(self) -> Opener | None:
        """Every part's own followers in one loop; polling if any part cannot stream."""
        openers = [hosts._follower_opener() for hosts, _ in self._parts]
        if any(o is None for o in openers):
            return None
        where = {i: (opener, own.index(i)) for opener, (_, own) in zip(openers, self._parts) for i in own}

        def open_on_part(index, args):
            opener, local = where[index]
            return opener(local, args)

        return open_on_part

    def close(self) -> None:
        for hosts, _ in self._parts:
            hosts.close()
