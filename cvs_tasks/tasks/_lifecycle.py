"""Flags every lifecycle task shares, and the one call each of them makes."""

from __future__ import annotations

from typing import Sequence

from invoke.exceptions import Exit

from cvs_tasks.run.rundir import RunRequest
from cvs_tasks.run.stages import TRAINING, Stage
from cvs_tasks.run.stages import stage as stage_row
from cvs_tasks.tasks._common import REPORTS_DIR_HELP, configured, user_errors

HELP = {
    "config": "Suite config JSON (default: cvs.config in invoke.yaml / INVOKE_CVS_CONFIG, else the latest run's)",
    "cluster": "Cluster file JSON (default: cvs.cluster / INVOKE_CVS_CLUSTER, the latest run's, "
               "else cluster/cluster.json)",
    "run": "Run id or run directory path (default: the latest run for this config, or a new one)",
    "suite": "single or distributed (default: from the config name and the host count)",
    "combo": "Sweep cell, e.g. MBS=4,GBS=128,PRECISION=FP8 (repeatable; default: all of sweep.runs)",
    "force": "Redo the stage even if this run already recorded it",
    "dry_run": "Print every command that would run on each node instead of running it",
    "reports_dir": REPORTS_DIR_HELP,
}


NO_COMBO = {k: v for k, v in HELP.items() if k != "combo"}


def request(c, config=None, cluster=None, run=None, suite=None, dry_run=False, force=False, reports_dir=None,
            new=False) -> RunRequest:
    """The run a task acts on: its flags, else Invoke's ``cvs.*`` configuration (``configured``).
    A hostile ``--run`` is refused here, before the lifecycle code is imported."""
    with user_errors():
        return RunRequest(config=configured(c, "config", config), cluster=configured(c, "cluster", cluster),
                          run=run, suite=suite, dry_run=bool(dry_run), force=bool(force),
                          reports_dir=configured(c, "reports_dir", reports_dir), new=new)


def listener():
    from cvs_tasks.report.console import make_console_listener

    return make_console_listener()


def stage_task(c, row: Stage, req: RunRequest, combos: Sequence[str] | None = None) -> None:
    """Run one lifecycle stage for the resolved run; exit with the stage's status.

    Combos are checked before anything runs. As a pre-task (``c.cvs_needed_by``) the stage runs
    only if the task the user named still has work (``needs_work``); a stage with a ``--combo``
    flag but not per combo (`invoke container --combo X`) runs only if X still has to train. A
    named stage that leaves the container up says so: the next command reuses it and
    `invoke teardown` removes it."""
    from cvs_tasks.lifecycle.flow import container_ready, interrupt_guard, run_stage, session_for
    from cvs_tasks.lifecycle.runner import Interrupted, exit_status

    needed_by = getattr(c, "cvs_needed_by", None)
    if needed_by is None and combos and row.combo_flag:
        needed_by = (TRAINING.id, False)
    req.check_config = row.checks_config
    with user_errors():
        events = listener()
        with events:
            session = session_for(req, events)
            for combo in combos or ():
                session.plan.combo(combo)  # an unknown combo is refused before any remote command
            if needed_by is not None and not needs_work(session, needed_by, combos):
                return
            try:
                with interrupt_guard(session):
                    records = run_stage(session, row.id, combos)
            except Interrupted:
                raise Exit(message="interrupted", code=130) from None
            if needed_by is None and not row.last and not session.dry_run and container_ready(session):
                session.say(f"the container stays up on {len(session.plan.hosts)} node(s) for the next command; "
                            "`invoke teardown` removes it")
        code = exit_status(records)
        if code:
            raise Exit(code=code)


def needs_work(session, needed_by: tuple[str | None, bool], combos: Sequence[str] | None) -> bool:
    """Does the named task (stage, forced) have anything left to do for these combos?

    A judging stage (``reads`` in the table: metric, loss) needs work only where the stage it
    reads is not recorded; any other stage when it is forced or not yet recorded."""
    from cvs_tasks.lifecycle.runner import is_done

    stage_id, forced = needed_by
    if stage_id is None:
        return True
    reads = stage_row(stage_id).reads or stage_id
    if forced and reads == stage_id:
        return True
    if stage_row(reads).per_combo:
        selected = list(combos) if combos else session.plan.combo_ids
        return any(not is_done(session.run.read_record(reads, c)) for c in selected)
    return not is_done(session.run.read_record(reads))
