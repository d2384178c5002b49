"""An invoke Executor that hands a task's run-context flags to its pre-tasks.

Invoke calls pre-tasks without the caller's arguments, so ``invoke train --config x.json`` would
launch the container of no config at all. This executor gives each pre-task the caller's values
for the flags the pre-task itself declares (``--config``, ``--cluster``, ``--run``, ``--suite``,
``--combo``, ``--dry-run``, ``--reports-dir``) — never ``--force``, which is meant for the task
the user named. Enabled by ``tasks.executor_class`` in the project's ``invoke.yaml``.
"""

from __future__ import annotations

import inspect

from invoke import Call, Executor, Task

FORWARDED = ("config", "cluster", "run", "suite", "combo", "dry_run", "reports_dir")


def _params(task: Task) -> set[str]:
    return set(inspect.signature(task.body).parameters)


class ForwardingExecutor(Executor):
    def expand_calls(self, calls):
        ret = []
        for call in calls:
            if isinstance(call, Task):
                call = Call(call)
            pre = [self._with_context(p, call) for p in call.pre]
            ret.extend(self.expand_calls(pre))
            ret.append(call)
            ret.extend(self.expand_calls(call.post))
        return ret

    @staticmethod
    def _with_context(pre, parent: Call) -> Call:
        task = pre.task if isinstance(pre, Call) else pre
        own = dict(pre.kwargs) if isinstance(pre, Call) else {}
        accepted = _params(task)
        for key in FORWARDED:
            value = parent.kwargs.get(key)
            if key in accepted and value not in (None, [], ()) and key not in own:
                own[key] = value
        return Call(task, kwargs=own)
