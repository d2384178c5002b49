"""Progress events a running stage emits; the console layer renders them.

Kept here, at the bottom layer, so both the producer (jobs.watch) and the renderer
(report.console) can import them without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class NodeProgress:
    stage: str  # "training", "smoke", ...
    combo: str | None
    host: str
    rank: int
    state: str  # "starting", "running", "done", "failed", "stalled"
    step: int | None = None
    total: int | None = None
    loss: float | None = None
    tflops: float | None = None
    elapsed_s: float = 0.0
    note: str = ""


@dataclass(frozen=True)
class StageEvent:
    """A stage started or ended (status set when it ended)."""

    stage: str
    combo: str | None
    status: str | None = None  # None: started; else PASS/FAIL/ERROR/SKIPPED
    reason: str = ""


@dataclass(frozen=True)
class Message:
    """A line for the user (what the stage is doing, a warning); already redacted."""

    text: str
    level: str = "info"  # info | warning | error


Listener = Callable[[object], None]


def ignore(_event: object) -> None:
    """A listener that drops every event (tests, --quiet)."""
