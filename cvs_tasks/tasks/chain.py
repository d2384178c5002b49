"""One command line, one run: the executor that sees a whole `invoke` command line before it runs.

Invoke hands each flag to the task it follows and calls pre-tasks without any, so
``invoke container smoke --config x.json`` would launch the container of the previous run's
config. ``ForwardingExecutor`` (named by ``tasks.executor_class`` in the project's ``invoke.yaml``,
and built into the ``cvs-tasks`` program) expands the command line so that:

- the run-context flags (``CHAIN_FLAGS``: ``--config``, ``--cluster``, ``--run``, ``--suite``,
  ``--dry-run``, ``--reports-dir``) given to any task apply to every task of the line that takes
  them; one given twice with different values is refused (exit 2) before anything runs
  (``chain_flags``);
- each pre-task gets the caller's values for the flags it declares (those, and ``--combo``, which
  stays per call: ``invoke metric --combo A loss --combo B`` judges A and B) — never ``--force``,
  which is meant for the task the user named;
- a judging stage (``reads`` in the stage table: metric, loss) gets its pre-tasks only with
  ``--with-pre`` (``invoke --help metric`` still shows them);
- every call's context carries ``cvs_chain`` (the line's flags; whether any task of it may launch
  containers or train, which decides whether it may join a finished run: ``RunRequest.launches``;
  which task is the line's last stage command) and each pre-task's ``cvs_needed_by``: the stage of
  the task the user named and whether it was forced.

Pre-tasks reach ``expand_calls`` as ``Task`` objects without kwargs; the named calls come from the
parser with every flag of their task (defaults included).
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field
from typing import Sequence

from invoke import Call, Executor, Task
from invoke.exceptions import Exit

from cvs_tasks.errors import EXIT_BAD_INPUT
from cvs_tasks.run.stages import Stage
from cvs_tasks.run.stages import stage as stage_row

# flags given to any task of a command line apply to every task of it (README, "Chaining rules")
CHAIN_FLAGS = ("config", "cluster", "run", "suite", "dry_run", "reports_dir")
PATH_FLAGS = frozenset({"config", "cluster", "reports_dir"})  # compared as the files they name
# flags a pre-task gets from the call it serves: the line's, and --combo, which stays per call
FORWARDED = (*CHAIN_FLAGS, "combo")


def _params(task: Task) -> set[str]:
    return set(inspect.signature(task.body).parameters)


def _given(value: object) -> bool:
    return value not in (None, False, "", [], ())


def _same(flag: str, a: object, b: object) -> bool:
    if flag in PATH_FLAGS:
        return os.path.realpath(os.path.expanduser(str(a))) == os.path.realpath(os.path.expanduser(str(b)))
    return a == b


def chain_flags(calls: Sequence[Call]) -> dict[str, object]:
    """The run-context flags given anywhere on the command line, each once.

    The same flag given twice with different values is refused (exit 2) naming both, before
    anything runs: one command line works on one run."""
    seen: dict[str, tuple[object, str]] = {}
    for call in calls:
        for flag in CHAIN_FLAGS:
            value = call.kwargs.get(flag)
            if not _given(value):
                continue
            name = call.called_as or call.task.name
            if flag in seen and not _same(flag, seen[flag][0], value):
                first, where = seen[flag]
                dashed = "--" + flag.replace("_", "-")
                raise Exit(message=f"{dashed} is given twice with different values: `{where} {dashed} {first}` and "
                                   f"`{name} {dashed} {value}`. One command line works on one run, and a flag given "
                                   "to any of its tasks applies to all of them: give it once.",
                           code=EXIT_BAD_INPUT)
            seen.setdefault(flag, (value, name))
    return {flag: value for flag, (value, _) in seen.items()}


def stage_launches(row: Stage, with_pre: bool = False) -> bool:
    """Would `invoke <row.task>` launch containers or train? A judging stage only with --with-pre;
    the stage that takes the container down never."""
    if row.reads:
        return with_pre
    return row.container != "down"


def call_launches(call: Call) -> bool:
    """May this stage command launch containers or train (``stage_launches``)? Other tasks do not
    join runs by this rule: `all`, `demo` and `diagnose` start a new run unless --run names one."""
    stage_id = getattr(call.task, "cvs_stage", None)
    return stage_id is not None and stage_launches(stage_row(stage_id), bool(call.kwargs.get("with_pre")))


@dataclass(frozen=True)
class Chain:
    """What the executor learnt from the whole command line, handed to every task it runs."""

    flags: dict = field(default_factory=dict)  # the run-context flags given, once each
    launches: bool = False  # some task may launch containers or train (RunRequest.launches)
    last_stage: int = -1  # position of the line's last stage command: it says whether the container stays up


class ChainCall(Call):
    """A call of one command line: its context carries ``cvs_chain``, ``cvs_last_stage`` (it is the line's
    last stage command) and, for a pre-task, ``cvs_needed_by``: the named task it runs for (stage, forced)."""

    def __init__(self, task: Task, *, chain: Chain, needed_by: tuple[str | None, bool] | None = None,
                 position: int = -1, **kwargs) -> None:
        super().__init__(task, **kwargs)
        self.chain = chain
        self.needed_by = needed_by
        self.position = position  # on the command line; -1 for a pre-task

    def make_context(self, config):
        context = super().make_context(config)
        context._set(cvs_chain=self.chain, cvs_last_stage=self.position == self.chain.last_stage)
        if self.needed_by is not None:
            context._set(cvs_needed_by=self.needed_by)
        return context


class PrerequisiteCall(ChainCall):
    """A pre-task call: it knows whom it serves."""

    def __init__(self, task: Task, *, needed_by: tuple[str | None, bool], chain: Chain | None = None,
                 **kwargs) -> None:
        super().__init__(task, chain=chain or Chain(), needed_by=needed_by, **kwargs)


class ForwardingExecutor(Executor):
    """Sees the whole command line: one set of run-context flags for all of it, pre-tasks with the
    caller's flags and whom they serve, judging without prerequisites unless asked (module docstring)."""

    def expand_calls(self, calls, needed_by: tuple[str | None, bool] | None = None,
                     inherited: dict | None = None, chain: Chain | None = None):
        if chain is None:  # the command line as parsed: every call the user named, in order
            calls = [Call(c) if isinstance(c, Task) else c for c in calls]
            flags = chain_flags(calls)
            calls = [self._on_line(call, flags) for call in calls]
            chain = Chain(flags=flags, launches=any(call_launches(call) for call in calls),
                          last_stage=max((i for i, call in enumerate(calls) if hasattr(call.task, "cvs_stage")),
                                         default=-1))
            calls = [ChainCall(call.task, chain=chain, called_as=call.called_as, args=call.args, kwargs=call.kwargs,
                               position=i) for i, call in enumerate(calls)]
        ret = []
        for call in calls:
            if isinstance(call, Task):
                call = Call(call)
            serves = needed_by or (getattr(call.task, "cvs_stage", None), bool(call.kwargs.get("force")))
            # the run context flows down the whole chain: train -> smoke -> tokenizer -> container
            context = dict(inherited or {})
            context.update((k, v) for k, v in call.kwargs.items() if k in FORWARDED and _given(v))
            pre = [self._with_context(p, context, serves, chain) for p in self._pre(call)]
            ret.extend(self.expand_calls(pre, serves, context, chain))
            ret.append(call)
            ret.extend(self.expand_calls(call.post, serves, context, chain))
        return ret

    @staticmethod
    def _on_line(call: Call, flags: dict) -> Call:
        """The call with the line's run-context flags it declares and was not given itself."""
        accepted = _params(call.task)
        kwargs = dict(call.kwargs)
        for key, value in flags.items():
            if key in accepted and not _given(kwargs.get(key)):
                kwargs[key] = value
        return Call(call.task, called_as=call.called_as, args=call.args, kwargs=kwargs)

    @staticmethod
    def _pre(call: Call) -> list:
        """A judging stage's prerequisites run only with --with-pre; `invoke --help` still shows them."""
        stage_id = getattr(call.task, "cvs_stage", None)
        if stage_id is not None and stage_row(stage_id).reads and not call.kwargs.get("with_pre"):
            return []
        return list(call.pre)

    @staticmethod
    def _with_context(pre, context: dict, serves: tuple[str | None, bool], chain: Chain) -> Call:
        task = pre.task if isinstance(pre, Call) else pre
        own = dict(pre.kwargs) if isinstance(pre, Call) else {}
        accepted = _params(task)
        for key, value in context.items():
            if key in accepted and key not in own:
                own[key] = value
        return PrerequisiteCall(task, kwargs=own, needed_by=serves, chain=chain)
