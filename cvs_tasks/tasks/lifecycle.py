"""The lifecycle's commands: `invoke all`, `invoke demo`, `invoke diagnose` and one command per stage
(`invoke container`, `smoke`, `train`, `metric`, ...), with the flags they share and the one call
each of them makes.

The stage commands are generated from the stage table (``cvs_tasks.run.stages``): one Invoke
namespace per stage, its default task named as in the table, its help line, its ``--combo`` flag
where the stage takes one, and ``pre=`` the tasks of the stages it needs. Adding a stage to the
table adds its command here.

Invoke calls pre-tasks without the caller's arguments, so ``invoke train --config x.json`` would
launch the container of no config at all. ``ForwardingExecutor`` (enabled by
``tasks.executor_class`` in the project's ``invoke.yaml``) gives each pre-task the caller's values
for the flags the pre-task itself declares (``--config``, ``--cluster``, ``--run``, ``--suite``,
``--combo``, ``--dry-run``, ``--reports-dir``) — never ``--force``, which is meant for the task the
user named. Each pre-task's context also carries ``cvs_needed_by``: the stage of the task the user
named and whether it was forced, so a pre-task can skip itself when that task has nothing left to
do (``invoke metric`` after a finished run launches nothing; ``stage_task``, ``needs_work``).
"""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Sequence

from invoke import Call, Collection, Executor, Task, task
from invoke.exceptions import Exit

from cvs_tasks.demo import fault_help
from cvs_tasks.run.rundir import RunRequest
from cvs_tasks.run.stages import TRAINING, Stage, table
from cvs_tasks.run.stages import stage as stage_row
from cvs_tasks.tasks._common import REPORTS_DIR_HELP, configured, reports_root, user_errors
from cvs_tasks.terminal import echo

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
    from cvs_tasks.history.store import record_command
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
            finally:
                record_command(session)  # an ad hoc run is in the history when its command ends
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
    if row.per_combo or row.combo_flag:
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
    made = Task(body, name=row.task_name, pre=pre, default=True, help=helps,
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
    from cvs_tasks.lifecycle.diagnose import run_diagnose
    from cvs_tasks.lifecycle.flow import close_sessions, session_for
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


# -- pre-tasks get the caller's flags --------------------------------------------------------------
FORWARDED = ("config", "cluster", "run", "suite", "combo", "dry_run", "reports_dir")


def _params(task: Task) -> set[str]:
    return set(inspect.signature(task.body).parameters)


class PrerequisiteCall(Call):
    """A pre-task call that knows the directly named task it runs for: (stage, forced)."""

    def __init__(self, task: Task, *, needed_by: tuple[str | None, bool], **kwargs) -> None:
        super().__init__(task, **kwargs)
        self.needed_by = needed_by

    def make_context(self, config):
        context = super().make_context(config)
        context._set(cvs_needed_by=self.needed_by)
        return context


class ForwardingExecutor(Executor):
    """Expands each call's pre-tasks with the caller's flags and whom they serve (see the module docstring)."""

    def expand_calls(self, calls, needed_by: tuple[str | None, bool] | None = None,
                     inherited: dict | None = None):
        ret = []
        for call in calls:
            if isinstance(call, Task):
                call = Call(call)
            serves = needed_by or (getattr(call.task, "cvs_stage", None), bool(call.kwargs.get("force")))
            # the run context flows down the whole chain: train -> smoke -> tokenizer -> container
            context = dict(inherited or {})
            context.update((k, v) for k, v in call.kwargs.items() if k in FORWARDED and v not in (None, [], ()))
            pre = [self._with_context(p, context, serves) for p in call.pre]
            ret.extend(self.expand_calls(pre, serves, context))
            ret.append(call)
            ret.extend(self.expand_calls(call.post, serves, context))
        return ret

    @staticmethod
    def _with_context(pre, context: dict, serves: tuple[str | None, bool]) -> Call:
        task = pre.task if isinstance(pre, Call) else pre
        own = dict(pre.kwargs) if isinstance(pre, Call) else {}
        accepted = _params(task)
        for key, value in context.items():
            if key in accepted and key not in own:
                own[key] = value
        return PrerequisiteCall(task, kwargs=own, needed_by=serves)
