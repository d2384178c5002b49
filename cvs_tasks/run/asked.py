"""What the commands of a run asked for: the ledger ``asked.jsonl`` of a run directory.

A run made of ad hoc commands is judged on what was asked. Each command appends one line per
request before it acts: the stages, the combos (``null``: every combo of the run), who asked
(``invoke train``, ``invoke all``) and when. ``invoke all`` asks for every stage up front, so a run
killed mid-way still shows what it meant to do. ``--exitfirst`` appends a ``stopped`` line for what
it then chose not to run.

A test row with no record is then one of three things (``Ledger.state``):
* never asked by any command: NOT-RUN "not asked", which does not fail the verdict;
* asked, and the last word about it is a ``stopped`` line: NOT-RUN, stopped on purpose (fails);
* asked and never recorded: the command stopped before it (interrupted or killed; fails).

A run directory without a ledger (made before it existed) or with one that cannot be read counts
every row as asked: the strict reading, which never turns a missing row into a pass.

Lines are appended (``O_APPEND``: two commands of one run never lose each other's line), never
through a symlink or a hard link planted in the run directory. A dry run asks nothing.
"""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from cvs_tasks.errors import BadInput
from cvs_tasks.inputs import InputRefused, read_text
from cvs_tasks.run.rundir import RunDir
from cvs_tasks.run.sandbox import inside

LEDGER = "asked.jsonl"
EXITFIRST = "stopped after the first failure (--exitfirst)"

State = Literal["asked", "stopped", "not asked"]


@dataclass(frozen=True)
class Ask:
    """One line of the ledger: ``by`` asked for ``stages`` (per-combo ones for ``combos``; None:
    every combo of the run). ``stopped`` says why those were then left out on purpose."""

    by: str
    stages: tuple[str, ...]
    combos: tuple[str, ...] | None = None
    time: float = field(default_factory=time.time)
    stopped: str = ""

    def covers(self, stage: str, combo: str | None) -> bool:
        if stage not in self.stages:
            return False
        return combo is None or self.combos is None or combo in self.combos

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"by": self.by, "stages": list(self.stages),
                               "combos": None if self.combos is None else list(self.combos), "time": self.time}
        if self.stopped:
            out["stopped"] = self.stopped
        return out

    @classmethod
    def from_dict(cls, d: Any) -> Ask:
        """The line as an Ask, or ValueError for anything that is not one."""
        if not isinstance(d, dict):
            raise ValueError("not an object")
        by, stages, combos, when, stopped = (d.get("by"), d.get("stages"), d.get("combos"), d.get("time"),
                                             d.get("stopped", ""))
        if not (isinstance(by, str) and _strings(stages) and (combos is None or _strings(combos))
                and isinstance(when, (int, float)) and not isinstance(when, bool) and isinstance(stopped, str)):
            raise ValueError("not a ledger line")
        return cls(by, tuple(stages), None if combos is None else tuple(combos), float(when), stopped)


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


@dataclass(frozen=True)
class Ledger:
    """The ledger's lines in the order they were written."""

    asks: tuple[Ask, ...]

    def last_about(self, stage: str, combo: str | None) -> Ask | None:
        """The latest line that covers the row (an ask after a stop asks again)."""
        return next((a for a in reversed(self.asks) if a.covers(stage, combo)), None)

    def state(self, stage: str, combo: str | None) -> State:
        last = self.last_about(stage, combo)
        if last is None:
            return "not asked"
        return "stopped" if last.stopped else "asked"

    def asked_anything(self) -> bool:
        return any(not a.stopped for a in self.asks)


def record_ask(run: RunDir, ask: Ask) -> None:
    """Append ``ask`` to the run's ledger (a dry run's run directory keeps nothing)."""
    if not run.durable:
        return
    path = run.path / LEDGER
    run.prepare_file(path)  # its folder is the run's own; a symlink planted at the name is removed
    line = (run.redact(json.dumps(ask.to_dict(), separators=(",", ":"))) + "\n").encode("utf-8")
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise BadInput(f"{path}: cannot append to the run's ledger ({exc.strerror or exc}); "
                       "remove what is there or start a new run") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:  # a FIFO, or a hard link to a file elsewhere
            raise BadInput(f"{path}: not a plain file of the run directory; the harness never writes through "
                           "another file (remove it, or start a new run)")
        os.write(fd, line)
    finally:
        os.close(fd)


def read_ledger(run: RunDir) -> Ledger | None:
    """The run's ledger; None when there is none or it cannot be read (then every row counts as asked)."""
    path = run.path / LEDGER
    if not os.path.lexists(path) or inside(run.path, LEDGER) is None:
        return None
    try:
        text = read_text(path, "run record")
        return Ledger(tuple(Ask.from_dict(json.loads(line)) for line in text.splitlines() if line.strip()))
    except (InputRefused, ValueError, RecursionError):
        return None

