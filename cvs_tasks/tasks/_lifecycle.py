"""Flags every lifecycle task shares, and the one call each of them makes."""

from __future__ import annotations

from typing import Sequence

from invoke.exceptions import Exit

from cvs_tasks.lifecycle.flow import RunRequest, interrupt_guard, run_stage, session_for
from cvs_tasks.lifecycle.runner import Interrupted, exit_status
from cvs_tasks.tasks._common import configured, user_errors

HELP = {
    "config": "Suite config JSON (default: cvs.config in invoke.yaml / INVOKE_CVS_CONFIG, else the latest run's)",
    "cluster": "Cluster file JSON (default: cvs.cluster / INVOKE_CVS_CLUSTER, the latest run's, else cluster/cluster.json)",
    "run": "Run id or run directory path (default: the latest run for this config, or a new one)",
    "suite": "single or distributed (default: from the config name and the host count)",
    "combo": "Sweep cell, e.g. MBS=4,GBS=128,PRECISION=FP8 (repeatable; default: all of sweep.runs)",
    "force": "Redo the stage even if this run already recorded it",
    "dry_run": "Print every command that would run on each node instead of running it",
    "reports_dir": "Folder holding run directories (default: cvs.reports_dir / INVOKE_CVS_REPORTS_DIR, $CVS_REPORTS_DIR, else reports)",
}


NO_COMBO = {k: v for k, v in HELP.items() if k != "combo"}


def request(c, config=None, cluster=None, run=None, suite=None, dry_run=False, force=False, reports_dir=None,
            new=False) -> RunRequest:
    """The run a task acts on: its flags, else Invoke's ``cvs.*`` configuration (``configured``)."""
    return RunRequest(config=configured(c, "config", config), cluster=configured(c, "cluster", cluster),
                      run=run, suite=suite, dry_run=bool(dry_run), force=bool(force),
                      reports_dir=configured(c, "reports_dir", reports_dir), new=new)


def listener():
    from cvs_tasks.report.console import make_console_listener

    return make_console_listener()


def stage_task(stage: str, req: RunRequest, combos: Sequence[str] | None = None, *, only_if_pending: bool = False) -> None:
    """Run one lifecycle stage for the resolved run; exit with the stage's status."""
    with user_errors():
        events = listener()
        with events:
            session = session_for(req, events)
            if only_if_pending and not _pending_training(session, combos):
                return
            try:
                with interrupt_guard(session):
                    records = run_stage(session, stage, combos)
            except Interrupted:
                raise Exit(message="interrupted", code=130) from None
        code = exit_status(records)
        if code:
            raise Exit(code=code)


def _pending_training(session, combos: Sequence[str] | None) -> bool:
    """As a pre-task of train/metric/loss: is there a selected combo still to train?"""
    from cvs_tasks.lifecycle.runner import is_done

    selected = list(combos) if combos else session.plan.combo_ids
    return any(not is_done(session.run.read_record("training", c)) for c in selected)
