"""``PollingFollow``: the follow contract over the old loop, one read per node per poll.

For hosts that cannot stream a follower (dry runs, the test fakes of ``remote/testing.py``; SSH,
local and Slurm nodes all stream now). It keeps them working exactly as before: every ``poll_s``
one ``read_command`` per live node through the transport's ``_exec_many``, bytes past the held
offset back, the exit-status file beside them.
A job's exit counts once a read finds the status and nothing more to read (the status is read
after the size, so one more read catches lines written in between).
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

from cvs_tasks.remote.follow import (
    Delta,
    Exited,
    Follow,
    FollowEvent,
    FollowOptions,
    FollowTarget,
    Lost,
    parse_exit_status,
)
from cvs_tasks.remote.results import node_error, to_node_result
from cvs_tasks.remote.shellcmd import parse_read_raw, read_command

DRAIN_READS = 4


class PollingFollow(Follow):
    """Reads every live node each ``options.poll_s`` (at once again while a node has more)."""

    def __init__(self, hosts, targets: Sequence[FollowTarget], options: FollowOptions, *,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], object] = time.sleep):
        if len(targets) != len(hosts.nodes):
            raise ValueError(f"follow needs one target per node ({len(hosts.nodes)}), got {len(targets)}")
        self.hosts = hosts
        self.targets = list(targets)
        self.options = options
        self._clock, self._sleep = clock, sleep
        self._offsets = [t.offset for t in targets]
        self._live = [True] * len(targets)
        self._next_poll = clock()
        self.polls = 0

    def events(self, timeout: float) -> list[FollowEvent]:
        wait = self._next_poll - self._clock()
        if wait > 0:
            self._sleep(min(wait, max(0.0, timeout)))
            if self._clock() < self._next_poll:
                return []
        return self._poll()

    def drain(self, timeout: float) -> list[FollowEvent]:
        out: list[FollowEvent] = []
        for _ in range(DRAIN_READS):
            out += self._poll()
            if self._next_poll > self._clock():  # nothing more pending
                break
        return out

    def restart(self, index: int, offset: int) -> None:
        self._offsets[index] = offset
        self._live[index] = True

    def close(self) -> None:
        self._live = [False] * len(self._live)

    def _poll(self) -> list[FollowEvent]:
        self.polls += 1
        started = self._clock()
        live = [i for i, on in enumerate(self._live) if on]
        out: list[FollowEvent] = []
        more = False
        if live:
            view = self.hosts if len(live) == len(self._live) else self.hosts.subset(live)
            commands = [read_command(self.targets[i].path, self._offsets[i], self.options.frame_bytes,
                                     self.targets[i].exit_path) for i in live]
            raws = view._exec_many(commands, [None] * len(live), max(10.0, self.options.poll_s * 5))
            for i, raw in zip(live, raws):
                more = self._take(i, raw, out) or more
        self._next_poll = started if more else started + self.options.poll_s
        return out

    def _take(self, i: int, raw, out: list[FollowEvent]) -> bool:
        """One node's read into events; True when that node has more to read at once."""
        node, target, offset = self.hosts.nodes[i], self.targets[i], self._offsets[i]
        result = to_node_result(node, raw, what=f"reading {target.path}")
        try:
            if not result.ok:
                raise ValueError(result.error)
            payload, size, sidecar = parse_read_raw(raw.stdout)
        except ValueError as exc:
            message = str(exc)
            self._live[i] = False
            out.append(Lost(i, message if message.startswith("node ") else node_error(node, message)))
            return False
        if size is not None and size < offset:
            self._live[i] = False
            out.append(Lost(i, node_error(node, f"reading {target.path}: {target.path} shrank to {size} bytes "
                                                f"below the read offset {offset} (truncated or replaced)")))
            return False
        if payload:
            out.append(Delta(i, offset, payload))
            self._offsets[i] = offset + len(payload)
        code = parse_exit_status(sidecar) if sidecar else None
        pending = size is not None and size > self._offsets[i]
        if code is not None and not payload and not pending:
            self._live[i] = False
            out.append(Exited(i, code, size))
            return False
        return pending or code is not None
