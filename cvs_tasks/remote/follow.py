"""Following a job's logs: one long-lived reader per node, framed deltas, then the exit status.

A watch used to cost one command per node per poll. A follower is started once per node for the
whole job instead (over SSH an exec channel on the node's open connection, on Slurm once per job,
here a local reader) and streams what the node's log gains. The harness consumes every node's
stream through one ``Follow`` from one loop, never a thread or a command per node per poll.

The harness owns the offset. Each ``Delta`` says where its bytes start in the node's log; a
consumer keeps, per node, the offset it holds and takes only bytes at or past it, so a follower
restarted from that offset (``Follow.restart`` after a ``Lost``) loses no byte and repeats none.

This module is the contract; each ``Hosts`` implementation provides ``Hosts.follow``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Union


@dataclass(frozen=True)
class FollowTarget:
    """What to follow on one node: the training log, the job's exit-status file, and the first
    byte wanted (the harness's own offset: 0 for a new job, the last held one on a restart)."""

    path: str
    exit_path: str
    offset: int = 0


@dataclass(frozen=True)
class Delta:
    """Bytes ``[offset, offset + len(data))`` of node ``index``'s log."""

    index: int
    offset: int
    data: bytes

    @property
    def end(self) -> int:
        return self.offset + len(self.data)


@dataclass(frozen=True)
class Exited:
    """Node ``index``'s job wrote its exit status, and every log byte before it was delivered.

    ``size`` is the log's size when the follower saw the status (None: not known); a consumer
    holding fewer bytes than that restarts the node to read the rest."""

    index: int
    code: int
    size: int | None = None


@dataclass(frozen=True)
class Lost:
    """Node ``index``'s follower ended without an exit status (it died, or its connection
    dropped). Nothing more comes from it until ``Follow.restart``."""

    index: int
    error: str


FollowEvent = Union[Delta, Exited, Lost]


class Follow(ABC):
    """Every node's follower for one job. One consumer calls it; ``close`` is idempotent."""

    @abstractmethod
    def events(self, timeout: float) -> list[FollowEvent]:
        """Wait at most ``timeout`` seconds for anything from any node; return all that arrived
        (possibly nothing), in arrival order per node."""

    @abstractmethod
    def restart(self, index: int, offset: int) -> None:
        """Start node ``index``'s follower again from ``offset`` (after a ``Lost``, or to re-read)."""

    @abstractmethod
    def close(self) -> None:
        """Stop every follower and release what they hold."""

    def __enter__(self) -> "Follow":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def take(held: int, delta: Delta) -> bytes:
    """The part of ``delta`` past the ``held`` offset: nothing twice, and b"" for a gap (a delta
    starting past ``held`` means bytes are missing: the consumer restarts the node from ``held``)."""
    if delta.offset > held or delta.end <= held:
        return b""
    return delta.data[held - delta.offset:]
