"""``ScriptedFollow``: ``ScriptedHosts``' followers, one look at each scripted log per poll interval.

A look is what a node's real follower does on its turn: the log grows by its next chunk, every
byte past the follower's offset is sent in frames of at most ``frame_bytes``, and the exit status
is sent once the exit-status file shows it (``exit_after``) and everything before it was sent.
Looks happen on the script's clock, so a test with a fake clock sees the same timing as a node
polling at ``options.poll_s``; a script's ``error`` fails every start, ``drops`` kill the follower.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from cvs_tasks.remote.follow import Delta, Exited, Follow, FollowEvent, FollowOptions, FollowTarget, Lost
from cvs_tasks.remote.results import node_error

if TYPE_CHECKING:
    from cvs_tasks.remote.testing import ScriptedHosts, ScriptedLog


class ScriptedFollow(Follow):
    def __init__(self, hosts: "ScriptedHosts", targets: Sequence[FollowTarget], options: FollowOptions):
        if len(targets) != len(hosts.nodes):
            raise ValueError(f"follow needs one target per node ({len(hosts.nodes)}), got {len(targets)}")
        self.hosts, self.targets, self.options = hosts, list(targets), options
        self._book = hosts._book
        self._logs: list["ScriptedLog | None"] = [None] * len(targets)
        self._offsets = [t.offset for t in targets]
        self._queued: list[FollowEvent] = []
        self._next_look = self._book.clock()
        self.starts = 0
        for index, target in enumerate(targets):
            self._start(index, target.offset)

    def events(self, timeout: float) -> list[FollowEvent]:
        if self._queued:
            out, self._queued = self._queued, []
            return out
        wait = self._next_look - self._book.clock()
        if wait > 0:
            self._book.sleep(min(wait, max(0.0, timeout)))
            if self._book.clock() < self._next_look:
                return []
        self._next_look = self._book.clock() + self.options.poll_s
        return self._look_all()

    def drain(self, timeout: float) -> list[FollowEvent]:
        out, self._queued = self._queued, []
        return out + self._look_all()

    def restart(self, index: int, offset: int) -> None:
        self._start(index, offset)

    def close(self) -> None:
        self._logs = [None] * len(self._logs)

    # -- inside ---------------------------------------------------------------------------
    def _start(self, index: int, offset: int) -> None:
        node, target = self.hosts.nodes[index], self.targets[index]
        self.starts += 1
        with self._book.lock:
            self._book.calls.append(self.hosts._call(node.name, f"follow {target.path} from {offset}"))
            log = self.hosts._log_for(node.name, target.path, offset)
            if log is None:
                call = self.hosts._call(node.name, f"follow {target.path}")
                self.hosts._unexpected(call, f"a follower of {target.path}")
            if log.error is not None:
                log.polls += 1
                self._logs[index] = None
                self._queued.append(Lost(index, node_error(node, f"following {target.path}: {log.error}")))
                return
        self._logs[index], self._offsets[index] = log, offset

    def _look_all(self) -> list[FollowEvent]:
        out: list[FollowEvent] = []
        with self._book.lock:
            for index, log in enumerate(self._logs):
                if log is not None:
                    self._look(index, log, out)
        return out

    def _look(self, index: int, log: "ScriptedLog", out: list[FollowEvent]) -> None:
        log.grow()
        if log.polls in log.drops:
            self._logs[index] = None
            out.append(Lost(index, node_error(self.hosts.nodes[index], f"following {self.targets[index].path}: "
                                                                       "the follower ended: killed by signal 9")))
            return
        offset, cap = self._offsets[index], self.options.frame_bytes
        while offset < len(log.content):
            piece = log.content[offset:offset + cap]
            out.append(Delta(index, offset, piece))
            log.sent += len(piece)
            offset += len(piece)
        self._offsets[index] = offset
        if log.status is not None:
            out.append(Exited(index, log.status, len(log.content) if log.exists else None))
            self._logs[index] = None
