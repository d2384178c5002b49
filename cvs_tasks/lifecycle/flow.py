"""The lifecycle in its pinned order, and single stages for ad hoc chaining.

The order is the product's (docs/product.md#stages-and-their-order).

``run_all`` walks the stage table (``run.stages``): launch -> tokenizer -> smoke -> checkpoint ->
training[combo]... -> metric[combo]... -> loss_curve[combo]..., and always runs the ``last`` stages
(teardown), also after Ctrl-C or SIGTERM (interrupt once: stop the job, tear down, record, render;
twice: exit at once). Its ``Scope`` narrows it: some combos only (``--combo``), stop after the first
failure (``--exitfirst``), or redo what failed or never ran (``--failed``, see ``failed_scope``).

Every stage a command sets out to run is first written to the run's ledger (``run.asked``), so the
report tells a row nobody asked for from one whose command died before recording it.
"""

from __future__ import annotations

import importlib
import os
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from cvs_tasks import runtimes
from cvs_tasks.lifecycle import diagnose
from cvs_tasks.lifecycle.runner import Interrupted, execute, exit_status, is_done
from cvs_tasks.lifecycle.session import RunRequest, Session, open_session
from cvs_tasks.run import StageRecord
from cvs_tasks.run.asked import EXITFIRST, Ask, record_ask
from cvs_tasks.run.stages import (
    DIAGNOSE,
    DOWNLOAD_TOKENIZER,
    LAUNCH_CONTAINER,
    TEARDOWN,
    Stage,
    container_stage,
    stage_ids,
    table,
)
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
              force: bool | None = None, ask: bool = True) -> list[StageRecord]:
    """One stage (every selected combo for per-combo stages), first asked for in the run's ledger
    (``ask``: ``run_all`` asked for its whole run up front).

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
        if ask:
            record_ask(session.run, Ask(row.task, (stage,), tuple(selected) if combos else None))
        return [execute(session, stage, c, body, force=force) for c in selected]
    if ask:
        record_ask(session.run, Ask(row.task, (stage,)))
    return [execute(session, stage, None, body, force=force)]


@dataclass(frozen=True)
class Scope:
    """What one `invoke all` runs of the lifecycle."""

    combos: tuple[str, ...] | None = None  # None: every combo of the plan (--combo narrows it)
    exitfirst: bool = False  # stop after the first failed test; still tear down, record and render
    redo: frozenset[tuple[str, "str | None"]] = frozenset()  # (stage, combo) redone although recorded: --failed
    last_only: bool = False  # only the last stages (--failed when only they failed)


ALL = "all"  # who asks in the ledger: `invoke all`


def run_all(session: Session, scope: Scope | None = None) -> int:
    """The whole lifecycle, or the part ``scope`` names; returns the exit status (0, 1, 3, or 130
    when interrupted). Asks for all of it in the run's ledger before anything runs."""
    scope = scope or Scope()
    for c in scope.combos or ():
        session.plan.combo(c)  # unknown combo -> BadInput before anything runs
    combos = [c for c in session.plan.combo_ids if scope.combos is None or c in scope.combos]  # sweep order
    asked = tuple(r.id for r in table() if r.last or not scope.last_only)
    record_ask(session.run, Ask(ALL, asked, None if scope.combos is None else tuple(combos)))
    records: list[StageRecord] = []
    interrupted = False
    with interrupt_guard(session):
        try:
            if not scope.last_only:
                records += _run_units(session, scope, combos)
            if not session.dry_run and diagnose.wanted_after_training(session):
                records.append(diagnose.diagnose(session))
        except Interrupted:
            interrupted = True
        finally:
            try:
                for row in table():
                    if row.last:
                        records += run_stage(session, row.id, force=True, ask=False)
            except Interrupted:
                interrupted = True
            finish_run(session, interrupted=interrupted)
    if interrupted:
        return EXIT_INTERRUPTED
    return exit_status(session.run.records())


Unit = list[tuple[Stage, "list[str] | None"]]


def units_of(combos: Sequence[str], exitfirst: bool) -> list[Unit]:
    """The non-last stages in order, in the units after which ``--exitfirst`` may stop: one per
    once-per-run stage; per-combo stages one per stage over every combo or, with ``exitfirst``,
    one per combo (its training, then its gates: a failing combo stops the sweep before the next
    combo trains)."""
    units: list[Unit] = []
    block: list[Stage] = []  # consecutive per-combo rows
    for row in [r for r in table() if not r.last] + [None]:
        if row is not None and row.per_combo:
            block.append(row)
            continue
        if block and combos:
            if exitfirst:
                units.extend([(r, [c]) for r in block] for c in combos)
            else:
                units.extend([(r, list(combos))] for r in block)
        block = []
        if row is not None:
            units.append([(row, None)])
    return units


def _run_units(session: Session, scope: Scope, combos: Sequence[str]) -> list[StageRecord]:
    began = time.time()
    units = units_of(combos, scope.exitfirst)
    records: list[StageRecord] = []
    for i, unit in enumerate(units):
        done: list[StageRecord] = []
        for row, selected in unit:
            if not scope.redo:
                done += run_stage(session, row.id, selected, ask=False)
                continue
            for combo in selected or [None]:  # --failed forces some combos of a stage, not all
                force = True if (row.id, combo) in scope.redo else None
                done += run_stage(session, row.id, None if combo is None else [combo], force=force, ask=False)
        records += done
        failed = [r for r in done if _fails_now(r, began)]
        if scope.exitfirst and failed and i + 1 < len(units):
            rest = [step for later in units[i + 1:] for step in later]
            stages = tuple(dict.fromkeys(row.id for row, _ in rest))
            left = tuple(dict.fromkeys(c for _, selected in rest for c in (selected or ())))
            record_ask(session.run, Ask(ALL, stages, left, stopped=EXITFIRST))
            session.say(f"--exitfirst: {', '.join(r.name for r in failed)} failed; "
                        f"not running the rest ({len(left)} more combo(s)); tearing down", "warning")
            break
    return records


def _fails_now(record: StageRecord, began: float) -> bool:
    """A failure this command recorded, of a stage whose failure does not already skip the rest."""
    return (record.status in ("FAIL", "ERROR") and record.ended >= began and not record.data.get("blocked_by")
            and not stage_row(record.stage).blocks_later)


def failed_scope(session: Session, combos: Sequence[str] | None = None, exitfirst: bool = False) -> Scope | None:
    """``--failed`` (pytest's ``--lf``): the combos whose training or gates failed, errored, were
    skipped because of a failure or never ran (NOT-RUN), and the once-per-run stages that did.

    A recorded FAIL stays until forced, so a combo with a FAIL row is trained and judged again
    (forced), as is a FAILed once-per-run stage; what errored or never ran runs anyway; what
    passed stays as recorded. None (and one line) when nothing is left."""
    run = session.run
    wanted = list(combos) if combos else session.plan.combo_ids
    for c in wanted:
        session.plan.combo(c)
    chosen: set[str] = set()
    redo: set[tuple[str, str | None]] = set()
    last = False
    per_combo = [r for r in table() if r.per_combo]
    for row in table():
        for combo in wanted if row.per_combo else [None]:
            record = run.read_record(row.id, combo)
            if not _to_redo(record):
                continue
            if combo is not None:
                chosen.add(combo)
                if record is not None and record.status == "FAIL":  # kept until forced: train and judge again
                    redo.update((r.id, combo) for r in per_combo)
            elif row.last:
                last = True
            else:
                redo.add((row.id, None))
    ordered = [c for c in wanted if c in chosen]
    once = [stage for stage, combo in sorted(redo, key=lambda k: stage_ids().index(k[0])) if combo is None]
    if not ordered and not once and not last:
        session.say(f"run {run.run_id}: nothing to re-run: every test passed or was skipped by rule")
        return None
    what = ([f"{len(ordered)} combo(s): {', '.join(ordered)}"] if ordered else []) + (
        [f"stage(s): {', '.join(once)}"] if once else [])
    session.say(f"run {run.run_id}: re-running {'; '.join(what) or 'the teardown'}")
    return Scope(combos=tuple(ordered), exitfirst=exitfirst, redo=frozenset(redo), last_only=not ordered and not once)


def _to_redo(record: StageRecord | None) -> bool:
    """Not passed: no record (NOT-RUN), a failure or an error, skipped because of one, interrupted."""
    return (record is None or record.status in ("FAIL", "ERROR") or bool(record.data.get("blocked_by"))
            or bool(record.data.get("interrupted")))


def finish_run(session: Session, *, interrupted: bool = False) -> None:
    """Stamp the manifest, record the run in the history (a warning at worst), render the reports."""
    if not session.run.durable:  # a dry run: nothing was kept to stamp, record or render
        return
    session.scheduler.judge_nodes(session)  # Slurm: the drain line of each node the run blames
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


__all__ = ["RunRequest", "Scope", "failed_scope", "run_all", "run_stage", "session_for", "close_sessions", "finish_run",
           "interrupt_guard"]


def run_diagnose(session: Session) -> int:
    """`invoke diagnose`: bring the containers up if needed, diagnose, tear down what this command
    launched, record and render. Returns the exit status (0 no outlier, 1 outliers, 3 infra, 130)."""
    launched = not container_ready(session)
    if not session.run.records():  # a run of its own: judged on the diagnosis alone
        manifest = session.run.manifest()
        manifest["scope"] = DIAGNOSE
        session.run.write_manifest(manifest)
    interrupted = False
    records: list[StageRecord] = []
    with interrupt_guard(session):
        try:
            if launched:
                records += run_stage(session, LAUNCH_CONTAINER.id)
                records += run_stage(session, DOWNLOAD_TOKENIZER.id)
            if all(r.status in ("PASS", "SKIPPED") for r in records):
                records.append(diagnose.diagnose(session))
        except Interrupted:
            interrupted = True
        finally:
            try:
                if launched:
                    records += run_stage(session, TEARDOWN.id, force=True)
                elif runtimes.get(session.config.container.runtime.name).node_docker:  # give the containers back
                    records += run_stage(session, LAUNCH_CONTAINER.id, force=True)
            except Interrupted:
                interrupted = True
            finish_run(session, interrupted=interrupted)
    return EXIT_INTERRUPTED if interrupted else exit_status(records)
