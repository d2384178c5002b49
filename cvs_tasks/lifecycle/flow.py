"""The lifecycle in its pinned order, and single stages for ad hoc chaining.

The order is the product's (docs/product.md#stages-and-their-order).

``run_all`` walks the stage table (``run.stages``): launch -> tokenizer -> smoke -> checkpoint ->
training[combo]... -> metric[combo]... -> loss_curve[combo]..., and always runs the ``last`` stages
(teardown), also after Ctrl-C or SIGTERM (interrupt once: stop the job, tear down, record, render;
twice: exit at once).
"""

from __future__ import annotations

import importlib
import os
import signal
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

from cvs_tasks.lifecycle import diagnose
from cvs_tasks.lifecycle.runner import Interrupted, execute, exit_status, is_done
from cvs_tasks.lifecycle.session import RunRequest, Session, open_session
from cvs_tasks.run import StageRecord
from cvs_tasks.run.stages import container_stage, table
from cvs_tasks.run.stages import stage as stage_row

EXIT_INTERRUPTED = 130

def body_of(stage: str) -> Callable[[Session, "str | None"], StageRecord]:
    """The stage's body, named ``"module:function"`` in its table row."""
    module, _, name = stage_row(stage).body.partition(":")
    return getattr(importlib.import_module(module), name)

_SESSIONS: dict[tuple[str, bool], Session] = {}


def session_for(req: RunRequest, listener: Callable[[object], None]) -> Session:
    """One Session per run directory per process, so pre-tasks and their task share connections
    (and chained dry-run tasks one run directory that records in memory)."""
    fresh = open_session(req, listener=listener)
    key = (str(fresh.run.path), fresh.run.durable)
    cached = _SESSIONS.get(key)
    if cached is not None:
        cached.force, cached.listener = req.force, listener
        return cached
    _SESSIONS[key] = fresh
    return fresh


def close_sessions() -> None:
    for s in _SESSIONS.values():
        s.close()
    _SESSIONS.clear()


@contextmanager
def interrupt_guard(session: Session) -> Iterator[None]:
    """First SIGINT/SIGTERM: raise Interrupted (stages stop, teardown runs). Second: exit now."""
    hits = 0

    def handler(signum, _frame):
        nonlocal hits
        hits += 1
        if hits > 1:
            os._exit(EXIT_INTERRUPTED)
        session.stop.set()
        session.say(f"{signal.Signals(signum).name}: stopping the job and tearing down (again to exit at once)",
                    "warning")
        raise Interrupted(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def container_ready(session: Session) -> bool:
    """The container is up: the stage that brings it up passed, and none took it down since."""
    launch = session.run.read_record(container_stage("up").id)
    down = session.run.read_record(container_stage("down").id)
    if not is_done(launch) or launch.status != "PASS":
        return False
    return down is None or down.started < launch.ended


def run_stage(session: Session, stage: str, combos: Sequence[str] | None = None, *,
              force: bool | None = None) -> list[StageRecord]:
    """One stage (every selected combo for per-combo stages).

    A stage that brings the container up or takes it down (``container`` in the stage table) runs
    again whenever the container is not in the state it leaves: launched again after a teardown,
    torn down again after a relaunch."""
    row = stage_row(stage)
    body = body_of(stage)
    if session.dry_run:  # chained dry-run tasks share one session: print each stage once
        key = (stage, tuple(combos or ()))
        if key in session.printed:
            session.say(f"{stage}: printed above (dry run)")
            return []
        session.printed.add(key)
    if row.container and container_ready(session) != (row.container == "up"):
        force = True
    if row.per_combo:
        selected = list(combos) if combos else session.plan.combo_ids
        for c in selected:
            session.plan.combo(c)  # unknown combo -> BadInput before anything runs
        return [execute(session, stage, c, body, force=force) for c in selected]
    return [execute(session, stage, None, body, force=force)]


def run_all(session: Session) -> int:
    """The whole lifecycle; returns the exit status (0, 1, 3, or 130 when interrupted)."""
    records: list[StageRecord] = []
    interrupted = False
    with interrupt_guard(session):
        try:
            for row in table():
                if not row.last:
                    records += run_stage(session, row.id)
            if not session.dry_run and diagnose.wanted_after_training(session):
                records.append(diagnose.diagnose(session))
        except Interrupted:
            interrupted = True
        finally:
            try:
                for row in table():
                    if row.last:
                        records += run_stage(session, row.id, force=True)
            except Interrupted:
                interrupted = True
            finish_run(session, interrupted=interrupted)
    if interrupted:
        return EXIT_INTERRUPTED
    return exit_status(session.run.records())


def finish_run(session: Session, *, interrupted: bool = False) -> None:
    """Stamp the manifest, record the run in the history (a warning at worst), render the reports."""
    if not session.run.durable:  # a dry run: nothing was kept to stamp, record or render
        return
    if session.scheduled:
        from cvs_tasks.lifecycle.allocation import judge_nodes

        judge_nodes(session)
    manifest = session.run.manifest()
    manifest["finished"] = time.time()
    manifest["interrupted"] = interrupted
    session.run.write_manifest(manifest)
    if session.config.history.enabled:
        from cvs_tasks.history import record_run_safely

        record_run_safely(session.run, session.history_path, lambda text: session.say(text, "warning"))
    from cvs_tasks.history.store import report_trends
    from cvs_tasks.report import render_all

    render_all(session.run, report_trends(session.history_path, warn=lambda text: session.say(text, "warning")))


__all__ = ["RunRequest", "run_all", "run_stage", "session_for", "close_sessions", "finish_run", "interrupt_guard"]
