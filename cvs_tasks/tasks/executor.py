"""An invoke Executor that hands a task's run-context flags to its pre-tasks, and tells each
pre-task which task the user named.

Invoke calls pre-tasks without the caller's arguments, so ``invoke train --config x.json`` would
launch the container of no config at all. This executor gives each pre-task the caller's values
for the flags the pre-task itself declares (``--config``, ``--cluster``, ``--run``, ``--suite``,
``--combo``, ``--dry-run``, ``--reports-dir``) — never ``--force``, which is meant for the task
the user named. Each pre-task's context also carries ``cvs_needed_by``: the stage of the task the
user named and whether it was forced, so a pre-task can skip itself when that task has nothing
left to do (``invoke metric`` after a finished run launches nothing). Enabled by
``tasks.executor_class`` in the project's ``invoke.yaml``.
"""

from __future__ import annotations

import inspect

from invoke import Call, Executor, Task

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
