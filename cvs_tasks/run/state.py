"""Whether a run is still open, and the line that names a command's run on the console.

A stage command without ``--run`` joins the latest run only while it is open
(``lifecycle.session.resolve_run``; README, "Chaining rules"), and every lifecycle command's first
console line says which run it works on, how it came to it, its config and its cluster.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from cvs_tasks.run.rundir import RunDir
from cvs_tasks.run.stages import container_stage


@dataclass(frozen=True)
class RunState:
    """Whether a run is open (a stage command without --run may join it) and, for the console, since when."""

    open: bool
    detail: str  # "started 2026-12-07 10:15:02", "finished ...", "torn down ..."


def run_state(run: RunDir) -> RunState:
    """A run is open from its start until it is over. It is over once ``finish_run`` stamped
    ``finished`` in its manifest (every ``invoke all``, ``demo`` and ``diagnose``, interrupted ones
    too), or, for a run of ad hoc commands, which never calls it, once its container was taken
    down after it last came up (``invoke teardown``). A run whose harness was killed stays open:
    the next command joins it and finds what it left."""
    manifest = run.manifest()
    if isinstance(manifest.get("finished"), (int, float)):
        return RunState(False, f"finished {_when(manifest['finished'])}")
    launch = run.read_record(container_stage("up").id)
    down = run.read_record(container_stage("down").id)
    if down is not None and (launch is None or down.started >= launch.ended):
        return RunState(False, f"torn down {_when(down.ended or down.started)}")
    created = manifest.get("created")
    return RunState(True, f"started {_when(created)}" if isinstance(created, (int, float)) else "open")


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def shown_path(path: object) -> str:
    """A file as the console shows it: relative to the working folder when it is inside it."""
    if not path:
        return "?"
    text = str(path)
    try:
        cwd = os.getcwd()
        if os.path.isabs(text) and os.path.commonpath([cwd, text]) == cwd:
            return os.path.relpath(text, cwd)
    except (ValueError, OSError):
        pass
    return text


def run_line(run_id: str | None, how: str, config: object, cluster: object, *, dry_run: bool = False) -> str:
    """A command's first console line: the run it works on, how it came to it, its config and cluster.

    ``how``: "new run", "joins the open run (started ...)", "joins the run (finished ...) to judge
    its records", ... A dry run says so first (it writes nothing); its new run has no id."""
    if dry_run:
        head = "dry run (nothing is written)" + (f" on run {run_id}" if run_id else "")
    else:
        head = f"run {run_id}"
    return f"{head}: {how}; config {shown_path(config)}, cluster {shown_path(cluster)}"


_ANNOUNCED: set[tuple[str, bool]] = set()


def first_mention(run: RunDir) -> bool:
    """Whether this process has not yet printed ``run``'s first line (and from now on, has): a
    command line of several tasks names its run once."""
    key = (str(run.path), run.durable)
    if key in _ANNOUNCED:
        return False
    _ANNOUNCED.add(key)
    return True
