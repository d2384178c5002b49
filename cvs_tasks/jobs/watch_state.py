"""What a watch works with and returns: settings, per-node targets and state, the outcome. Plain data."""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from cvs_tasks.metrics import LogParser


class Verdict(Protocol):
    """What a config check returns (``verify.ConfigCheck``): ok, and a reason when not."""

    ok: bool
    reason: str


ConfigCheckFn = Callable[[LogParser], "Verdict | None"]


@dataclass(frozen=True)
class WatchSettings:
    poll_interval_s: float = 2.0
    stall_timeout_s: float = 900.0  # no new iteration for this long -> stalled
    startup_timeout_s: float = 1800.0  # no first iteration for this long -> stalled
    timeout_s: float = 0.0  # overall; 0 -> derived from the iteration count
    exit_grace_s: float = 60.0  # after the last iteration, how long the job may take to exit
    max_bytes: int = 16 * 1024 * 1024  # the most one frame from a node's follower carries (capped at 1 MiB)
    unreachable_after: int = 3  # a node's follower lost this many times in a row

    def overall_timeout(self, iterations: int) -> float:
        if self.timeout_s > 0:
            return self.timeout_s
        return min(self.startup_timeout_s + max(1, iterations) * self.stall_timeout_s, 48 * 3600.0)


@dataclass(frozen=True)
class WatchTarget:
    """One node's job: where its log and exit-status file are, and where to copy the log locally."""

    rank: int
    host: str
    log_path: str
    exit_path: str
    local_copy: Path | None = None


@dataclass
class NodeState:
    target: WatchTarget
    parser: LogParser
    offset: int = 0
    exit_code: int | None = None
    read_failures: int = 0
    last_error: str = ""
    state: str = "starting"
    config_check: Verdict | None = None  # the trainer's effective config vs the plan, once its dump is read
    restart_at: float | None = None  # when its lost follower is started again
    restarted_at: float | None = None
    decoder: codecs.IncrementalDecoder = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace"))

    @property
    def last_step(self) -> int | None:
        return self.parser.last_step

    @property
    def planned(self) -> int | None:
        return self.parser.planned


@dataclass
class WatchOutcome:
    status: str  # completed | failed | mismatch | exited | stalled | timeout | unreachable | interrupted
    reason: str
    nodes: list[NodeState]
    reporting_rank: int
    elapsed_s: float
    error: dict | None = None  # {name, cls, host, rank, line, text}
    tail: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # about the trainer's config (recorded with its check)
    notes: list[str] = field(default_factory=list)  # how the watch went: log followers restarted

    @property
    def config_check(self) -> Verdict | None:
        """The first node's effective-config check (the node whose log holds the dump)."""
        checks = (getattr(n, "config_check", None) for n in self.nodes)  # tests hand in bare node records
        return next((c for c in checks if c is not None), None)

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    @property
    def infrastructure(self) -> bool:
        """True when the harness lost a node, as opposed to the job failing on it."""
        return self.status == "unreachable"

    @property
    def reporting(self) -> NodeState:
        return self.nodes[self.reporting_rank]
