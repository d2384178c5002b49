"""Progress events a running stage emits, and the stage's own log that records them.

The events are kept here, at the bottom layer, so both the producer (lifecycle.watch) and the renderer
(report.console) can import them without importing each other.

Each stage's own captured log (``logs/<stage>[<combo>].log``) is what it ran and saw, with times:
the lifecycle tees the events a stage emits into this file while the stage runs (``StageLog``), so
every row of the report links to a readable account of that stage alone. The file is made new each
time (a symlink or hard link planted in its place is replaced, never written through) and every
line is masked of the run's secrets.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from cvs_tasks.errors import BadInput
from cvs_tasks.run.redact import Redactor
from cvs_tasks.run.sandbox import open_for_write


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


# -- the stage's own log ---------------------------------------------------------------------------
class StageLog:
    """A listener that writes each event as a line of the stage's log, then passes it on; a context
    manager: the file is open while the stage runs."""

    def __init__(self, path: Path, forward: Callable[[object], None], *, root: Path | None = None,
                 redact: Redactor | None = None) -> None:
        self.path = path
        self.forward = forward
        self.root = root  # the run directory: the log's folders are made inside it
        self.redact = redact or Redactor()
        self._fh = None
        self._last_state: dict[tuple[str, int], str] = {}

    def __enter__(self) -> StageLog:
        try:  # best effort: a full or unwritable run directory must not stop the stage (or its teardown)
            if self.root is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open_for_write(self.path, self.root)
        except (OSError, BadInput):
            self._fh = None
        return self

    def __exit__(self, *exc) -> None:
        if self._fh is not None:
            try:
                self._fh.close()
            except OSError:
                pass
            self._fh = None

    def __call__(self, event: object) -> None:
        line = self._line(event)
        if line and self._fh is not None:
            try:
                self._fh.write(f"{time.strftime('%H:%M:%S')} {self.redact(line)}\n".encode("utf-8", "replace"))
                self._fh.flush()
            except OSError:
                self.__exit__()
        self.forward(event)

    def _line(self, event: object) -> str | None:
        if isinstance(event, Message):
            return event.text if event.level == "info" else f"{event.level.upper()}: {event.text}"
        if isinstance(event, StageEvent):
            return "started" if event.status is None else f"{event.status}: {event.reason}"
        if isinstance(event, NodeProgress):
            key = (event.host, event.rank)
            changed = self._last_state.get(key) != event.state
            self._last_state[key] = event.state
            if (not changed and event.state == "running" and event.step and event.total
                    and event.step % max(1, event.total // 10)):
                return None  # running nodes: about ten lines per job, plus every state change
            loss = f" loss {event.loss:.4g}" if event.loss is not None else ""
            tput = f" {event.tflops:.1f} TFLOP/s/GPU" if event.tflops is not None else ""
            note = f" ({event.note})" if event.note else ""
            return f"node {event.rank} {event.host}: {event.state} step {event.step}/{event.total}{loss}{tput}{note}"
        return None
