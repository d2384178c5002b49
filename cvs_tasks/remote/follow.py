"""Following a job's logs: one long-lived reader per node, framed deltas, then the exit status.

A watch used to cost one command per node per poll. A follower is started once per node for the
whole job instead (over SSH an exec channel on the node's open connection, on the harness machine
a subprocess; both run ``remote/follower.py``'s program) and streams what the node's log gains.
The harness consumes every node's stream through one ``Follow`` from one loop, never a thread or a
command per node per poll. On Slurm the followers are one step with a task per node
(``remote/slurm_follow.py``). Hosts that cannot stream (dry runs, test fakes) get ``PollingFollow``
(``remote/follow_poll.py``): the same events from the old one-read-per-node-per-poll loop.

The harness owns the offset. Each ``Delta`` says where its bytes start in the node's log; a
consumer keeps, per node, the offset it holds and takes only bytes at or past it (``take``), so a
follower restarted from that offset (``Follow.restart`` after a ``Lost``) loses no byte and
repeats none.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Union

FRAME_BYTES = 1024 * 1024  # the most one data frame carries (a follower sends as many as it needs)
HEARTBEAT_S = 5  # an idle follower says it is alive this often
SILENCE_FACTOR = 4  # a follower unheard for this many heartbeats (+ one poll) is lost


@dataclass(frozen=True)
class FollowTarget:
    """What to follow on one node: the training log, the job's exit-status file, and the first
    byte wanted (the harness's own offset: 0 for a new job, the last held one on a restart)."""

    path: str
    exit_path: str
    offset: int = 0


@dataclass(frozen=True)
class FollowOptions:
    """How followers behave: their own poll interval on the node, the frame size, the heartbeat."""

    poll_s: float = 2.0
    frame_bytes: int = FRAME_BYTES
    heartbeat_s: int = HEARTBEAT_S

    @property
    def silence_s(self) -> float:
        """How long a follower may say nothing before it counts as lost."""
        return SILENCE_FACTOR * self.heartbeat_s + self.poll_s + 5.0


DEFAULT_OPTIONS = FollowOptions()


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

    ``size`` is the log's size when the follower saw the status (None: no log); a consumer
    holding fewer bytes than that restarts the node to read the rest."""

    index: int
    code: int
    size: int | None = None


@dataclass(frozen=True)
class Lost:
    """Node ``index``'s follower ended without an exit status (it died, its connection dropped,
    it went silent, or it could not start). Nothing more comes from it until ``Follow.restart``."""

    index: int
    error: str


FollowEvent = Union[Delta, Exited, Lost]


class Follow(ABC):
    """Every node's follower for one job. One consumer calls it; ``close`` is idempotent."""

    @abstractmethod
    def events(self, timeout: float) -> list[FollowEvent]:
        """Wait at most ``timeout`` seconds for anything from any node; return all that arrived
        (possibly nothing), in arrival order per node, as soon as there is something."""

    @abstractmethod
    def drain(self, timeout: float) -> list[FollowEvent]:
        """Have every live follower look at its node now, and return what that brought (waiting
        at most ``timeout``): what a node wrote before this call is delivered by its return."""

    @abstractmethod
    def restart(self, index: int, offset: int) -> None:
        """Start node ``index``'s follower again from ``offset`` (after a ``Lost``). Never raises:
        a follower that cannot start is reported as a ``Lost`` by the next ``events``."""

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


def parse_exit_status(text: str) -> int | None:
    """The exit status an exit-status file holds (its last line), or None while it has none."""
    try:
        return int(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
