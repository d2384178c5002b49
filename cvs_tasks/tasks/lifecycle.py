"""The lifecycle's commands: `invoke all`, `invoke demo`, `invoke diagnose` and one command per stage
(`invoke container`, `smoke`, `train`, `metric`, ...), with the flags they share and the one call
each of them makes.

The stage commands are generated from the stage table (``cvs_tasks.run.stages``): one Invoke
namespace per stage, its default task named as in the table, its help line, its ``--combo`` flag
where the stage takes one, and ``pre=`` the tasks of the stages it needs. Adding a stage to the
table adds its command here.

A command line is one run: ``cvs_tasks.tasks.chain.ForwardingExecutor`` sees it whole, gives every
task the run-context flags given to any of them, and each pre-task its caller's flags and whom it
serves (``cvs_needed_by``), so a pre-task skips itself when the named task has nothing left to do
(``needs_work``). A judging stage (metric, loss) runs its pre-tasks only with ``--with-pre``;
without, it judges what is recorded and refuses a combo with no training record
(``refuse_untrained``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from invoke import Collection, Task
from invoke.exceptions import Exit

from cvs_tasks.demo import fault_help
from cvs_tasks.errors import BadInput
from cvs_tasks.run.rundir import RunRequest
from cvs_tasks.run.stages import TRAINING, Stage, table
from cvs_tasks.run.stages import stage as stage_row
from cvs_tasks.tasks._common import (
    REPORTS_DIR_HELP,
    FlagTableTask,
    configured,
    program,
    reports_root,
    task,
    user_errors,
)
from cvs_tasks.tasks.chain import stage_launches
from cvs_tasks.terminal import echo

HELP = {
    "config": "Suite config JSON (default: cvs.config in invoke.yaml / INVOKE_CVS_CONFIG, else the latest run's)",
    "cluster": "Cluster file JSON (default: cvs.cluster / INVOKE_CVS_CLUSTER, the latest run's, "
               "else cluster/cluster.json)",
    "run": "Run id, run directory path or `latest`; needed to add launches or training to a run that is over "
           "(default: the latest run while it is open, else a new one for --config)",
    "suite": "single or distributed (default: from the config name and the host count)",
    "combo": "Sweep cell, e.g. MBS=4,GBS=128,PRECISION=FP8 (repeatable; default: all of sweep.runs)",
    "force": "Redo the stage even if this run already recorded it",
    "dry_run": "Print every command that would run on each node instead of running it",
    "reports_dir": REPORTS_DIR_HELP,
}
WITH_PRE_HELP = ("Where a combo has no training record, run what records it first (container, tokenizer, smoke, "
                 "training; the console says which combos on which nodes); without it, judging trains nothing")


NO_COMBO = {k: v for k, v in HELP.items() if k != "combo"}


def request(c, config=None, cluster=None, run=None, suite=None, dry_run=False, force=False, reports_dir=None,
            new=False, launches=True) -> RunRequest:
    """The run a task acts on: its flags, else Invoke's ``cvs.*`` configuration (``configured``).
    A hostile ``--run`` is refused here, before the lifecycle code is imported."""
    with user_errors():
        return RunRequest(config=configured(c, "config", config), cluster=configured(c, "cluster", cluster),
                          run=run, suite=suite, dry_run=bool(dry_run), force=bool(force),
                          reports_dir=configured(c, "reports_dir", reports_dir), new=new, launches=launches)


def listener():
    from cvs_tasks.report.console import make_console_listener

    return make_console_listener()


def stage_task(c, row: Stage, req: RunRequest, combos: Sequence[str] | None = None, with_pre: bool = False) -> None:
    """Run one lifecycle stage for the resolved run; exit with the stage's status.

    Combos are checked before anything runs. As a pre-task (``c.cvs_needed_by``) the stage runs
    only if the task the user named still has work (``needs_work``); a stage with a ``--combo``
    flag but not per combo (`invoke container --combo X`) runs only if X still has to train. A
    judging stage named without ``--with-pre`` refuses combos with no training record
    (``refuse_untrained``). A named stage that leaves the container up says so: the next command
    reuses it and `invoke teardown` removes it."""
    from cvs_tasks.history.store import record_command
    from cvs_tasks.lifecycle.flow import container_ready, interrupt_guard, run_stage, session_for
    from cvs_tasks.lifecycle.runner import Interrupted, exit_status
    from cvs_tasks.report import build_results
    from cvs_tasks.report.console import print_command_failures

    needed_by = getattr(c, "cvs_needed_by", None)
    if needed_by is None and combos and row.combo_flag:
        needed_by = (TRAINING.id, False)
    chain = getattr(c, "cvs_chain", None)
    req.launches = chain.launches if chain is not None else stage_launches(row, with_pre)
    req.judges = needed_by is None and bool(row.reads) and not with_pre
    req.check_config = row.checks_config
    with user_errors():
        events = listener()
        with events:
            session = session_for(req, events)
            for combo in combos or ():
                session.plan.combo(combo)  # an unknown combo is refused before any remote command
            if needed_by is not None and not needs_work(session, needed_by, combos):
                return
            if needed_by is None and row.reads and not with_pre:
                refuse_untrained(session, row, combos)
            named = stage_row(needed_by[0]) if needed_by is not None and needed_by[0] else None
            if named is not None and named.reads:
                tell_with_pre(session, named, combos)
            try:
                with interrupt_guard(session):
                    records = run_stage(session, row.id, combos)
            except Interrupted:
                raise Exit(message="interrupted", code=130) from None
            finally:
                record_command(session)  # an ad hoc run is in the history when its command ends
            last = getattr(c, "cvs_last_stage", True)  # the line's last stage command says it, once
            if needed_by is None and last and not row.last and not session.dry_run and container_ready(session):
                session.say(f"the container stays up on {len(session.plan.hosts)} node(s) for the next command; "
                            f"`{program()} teardown` removes it")
        code = exit_status(records)
        if code and not session.dry_run:
            print_command_failures(build_results(session.run), {r.name for r in records}, run_dir=session.run.path)
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
        return bool(pending(session, reads, combos))
    return not is_done(session.run.read_record(reads))


def pending(session, stage_id: str, combos: Sequence[str] | None) -> list[str]:
    """The selected combos (all of sweep.runs when none) whose ``stage_id`` record is not final."""
    from cvs_tasks.lifecycle.runner import is_done

    selected = list(combos) if combos else session.plan.combo_ids
    return [c for c in selected if not is_done(session.run.read_record(stage_id, c))]


def refuse_untrained(session, row: Stage, combos: Sequence[str] | None) -> None:
    """A judging stage judges what is recorded: a combo it is asked about whose ``reads`` stage never
    ran (no record, or one shown but never started) is refused (exit 2) before anything is judged,
    naming the command that records it. A failed or errored record is judged (SKIPPED, with its cause)."""
    selected = list(combos) if combos else session.plan.combo_ids
    missing = [c for c in selected if _never_ran(session.run.read_record(row.reads, c))]
    if not missing:
        return
    source = stage_row(row.reads)
    run = f" --run {session.run.run_id}" if session.scratch is None else ""
    dry = " --dry-run" if session.dry_run else ""
    picks = " ".join(f'--combo "{c}"' for c in missing)
    asked = " ".join(f'--combo "{c}"' for c in combos or ())
    recorded = [c for c in selected if c not in missing]
    raise BadInput(
        f"run {session.run.run_id} has no {source.id} record for {len(missing)} combo(s) asked for: "
        f"{', '.join(missing)}. `{program()} {row.task}` judges what is recorded and trains nothing. Either\n"
        f"  {program()} {source.task} {picks}{run}{dry}   records them, then judge again, or\n"
        f"  {program()} {row.task} {(asked + ' ') if asked else ''}--with-pre{run}{dry}   runs what they need first, "
        "then judges"
        + (f"\nRecorded, judged with --combo: {', '.join(recorded)}" if recorded else ""))


def _never_ran(record) -> bool:
    return record is None or (record.status == "SKIPPED" and not record.data.get("blocked_by"))


def tell_with_pre(session, named: Stage, combos: Sequence[str] | None) -> None:
    """Before `--with-pre` runs a judging task's prerequisites: which combos, on which nodes (once)."""
    key = ("with-pre", named.id)
    if key in session.told:
        return
    session.told.add(key)
    todo = pending(session, named.reads, combos)
    nodes = ", ".join(h.address for h in session.plan.hosts)
    session.say(f"--with-pre: {len(todo)} combo(s) of run {session.run.run_id} have no {named.reads} result: "
                f"{', '.join(todo)}; running what they need first (container, tokenizer, smoke as needed, then "
                f"{named.reads}) on {len(session.plan.hosts)} node(s): {nodes}", "warning")


# -- the stage commands, from the stage table ------------------------------------------------------
COMBO_FLAG_HELP = "(chaining) run only if one of these combos still has to train"


def stage_collections() -> list[Collection]:
    """One Collection per stage, in lifecycle order; pre-tasks are the tasks of ``needs``."""
    tasks: dict[str, Task] = {}
    collections = []
    for row in table():
        unknown = [n for n in row.needs if n not in tasks]
        if unknown:
            raise ValueError(f"stage {row.id!r} needs {unknown}, which are not earlier rows of the stage table")
        made = _task(row, pre=[tasks[n] for n in row.needs])
        tasks[row.id] = made
        collections.append(Collection(row.task, made))
    return collections


def _task(row: Stage, pre: list[Task]) -> Task:
    if row.reads:  # a judging stage: its pre-tasks run only when asked (see the module docstring)
        def body(c, config=None, cluster=None, run=None, suite=None, combo=None, force=False, dry_run=False,
                 reports_dir=None, with_pre=False):
            stage_task(c, row, request(c, config, cluster, run, suite, dry_run, force, reports_dir), combo,
                       bool(with_pre))

        helps = dict(HELP, with_pre=WITH_PRE_HELP)
    elif row.per_combo or row.combo_flag:
        def body(c, config=None, cluster=None, run=None, suite=None, combo=None, force=False, dry_run=False,
                 reports_dir=None):
            stage_task(c, row, request(c, config, cluster, run, suite, dry_run, force, reports_dir), combo)

        helps = HELP if row.per_combo else dict(HELP, combo=COMBO_FLAG_HELP)
    else:
        def body(c, config=None, cluster=None, run=None, suite=None, force=False, dry_run=False, reports_dir=None):
            stage_task(c, row, request(c, config, cluster, run, suite, dry_run, force, reports_dir))

        helps = NO_COMBO
    body.__name__ = body.__qualname__ = row.task_name
    body.__doc__ = row.help
    # Invoke deduplicates calls by task name and body code: give each stage's body its own code
    # object, or `invoke metric loss` would run `metric.check` twice and never `loss.check`.
    body.__code__ = body.__code__.replace(co_name=f"{row.id}_task")
    made = FlagTableTask(body, name=row.task_name, pre=pre, default=True, help=helps,
                         iterable=["combo"] if "combo" in helps else None)
    made.cvs_stage = row.id  # read by the ForwardingExecutor: whom a pre-task serves
    return made


# -- the whole lifecycle ---------------------------------------------------------------------------
def _run_all(req, combos: Sequence[str] | None = None, exitfirst: bool = False, failed: bool = False) -> int:
    """The lifecycle for ``req``'s run (``Scope``: these combos, stop at the first failure); with
    ``failed`` only what failed or never ran, or exit 0 with one line when nothing did."""
    from cvs_tasks.lifecycle.flow import Scope, close_sessions, failed_scope, run_all, session_for
    from cvs_tasks.report import build_results
    from cvs_tasks.report.console import print_summary

    with user_errors():
        events = listener()
        with events:
            session = session_for(req, events)
            try:
                scope = Scope(tuple(combos) if combos else None, bool(exitfirst))
                if failed:
                    scope = failed_scope(session, combos, bool(exitfirst))
                    if scope is None:
                        return 0
                code = run_all(session, scope)
            finally:
                close_sessions()
        if not req.dry_run:
            print_summary(build_results(session.run), run_dir=session.run.path)
    return code


ALL_HELP = dict(
    HELP, combo="Sweep cell to run (repeatable; default: every combo of sweep.runs); the others are NOT-RUN "
                "'not asked'",
    exitfirst="Stop after the first failed test (a combo's training or gates, the checkpoint); still tear "
              "down and report; the rest is NOT-RUN",
    failed="Re-run what failed, errored or is NOT-RUN in --run (default: the latest run), as pytest's --lf: a "
           "FAILed combo is trained and judged again although recorded; what passed is kept (with --force, "
           "every stage it runs is redone)")


# `exitfirst` after `reports_dir` (-e): Invoke's automatic short flag for it is then -x, as in pytest
@task(name="all", help=ALL_HELP, iterable=["combo"])
def all_(c, config=None, cluster=None, run=None, suite=None, combo=None, force=False, dry_run=False,
         reports_dir=None, exitfirst=False, failed=False):
    # implicit concatenation: still the docstring, and `invoke --list` keeps showing it as one line
    ("Run every stage in order (launch, tokenizer, smoke, checkpoint, train, metric, loss), "
     "always tear down, report.")
    if failed and run is None:  # --failed works on a run that exists: the latest one by default
        with user_errors():
            from cvs_tasks.run.rundir import RunDir

            run = str(RunDir.resolve(reports_root(c, reports_dir), None).path)
    req = request(c, config, cluster, run, suite, dry_run, force, reports_dir, new=run is None)
    code = _run_all(req, combo, exitfirst, failed)
    if code:
        raise Exit(code=code)


@task(help={"reports_dir": HELP["reports_dir"], "run": "Run id or path (default: a new run)", "fault": fault_help()})
def demo(c, run=None, reports_dir=None, fault=None):
    """The whole lifecycle on this machine: simulated trainer, host runtime, localhost; ends in a report."""
    from cvs_tasks.templates import template_dir

    config = template_dir("configs") / "testbed" / "demo_host.json"
    cluster = template_dir("cluster") / "localhost.json"
    req = request(c, str(config), str(cluster), run, None, False, False, reports_dir, new=run is None)
    if fault:
        req = replace(req, config=_demo_fault_config(config, fault, req.reports_root))
    code = _run_all(req)
    if code:
        raise Exit(code=code)


def _demo_fault_config(config, name: str, reports_root) -> str:
    """The demo config with the fault ``name`` injected, written under the reports folder (the
    shipped one is never edited); an unknown name is exit 2 with the choices."""
    from cvs_tasks.demo import fault_named, write_faulted_config

    with user_errors():
        fault = fault_named(name)
        written, combo = write_faulted_config(config, fault, reports_root / "demo-configs")
    echo(f"demo: fault {fault.name} in combo {combo} (SIM_FAULT={fault.sim_fault}): {fault.shows}",
         f"demo: config {written}")
    return str(written)


@task(help={k: v for k, v in NO_COMBO.items() if k not in ("force", "dry_run")})
def diagnose(c, config=None, cluster=None, run=None, suite=None, reports_dir=None):
    """Smoke-test every node alone, in parallel; name outliers (failure, or step time/throughput off the median)."""
    from cvs_tasks.lifecycle.flow import close_sessions, run_diagnose, session_for
    from cvs_tasks.report import build_results
    from cvs_tasks.report.console import print_summary
    from cvs_tasks.run.stages import DIAGNOSE

    with user_errors():
        events = listener()
        with events:
            session = session_for(request(c, config, cluster, run, suite, False, False, reports_dir, new=run is None),
                                  events)
            try:
                code = run_diagnose(session)
            finally:
                close_sessions()
        record = session.run.read_record(DIAGNOSE)
        print_summary(build_results(session.run), run_dir=session.run.path)
        if record is not None:
            echo(f"diagnose: {record.status}: {record.reason}",
                 f"failing nodes: {session.run.path / 'failing_nodes.txt'}")
    if code:
        raise Exit(code=code)
