"""The lifecycle stage commands (`invoke container`, `smoke`, `train`, `metric`, ...), generated
from the stage table (``cvs_tasks.run.stages``): one Invoke namespace per stage, its default task
named as in the table, its help line, its ``--combo`` flag where the stage takes one, and ``pre=``
the tasks of the stages it needs. Adding a stage to the table adds its command here."""

from __future__ import annotations

from invoke import Collection, Task

from cvs_tasks.run.stages import Stage, table
from cvs_tasks.tasks._lifecycle import HELP, NO_COMBO, request, stage_task

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
