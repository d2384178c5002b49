"""The `cvs-tasks` console script: this collection as a program of its own, from any folder.

`invoke` in the checkout finds `tasks.py` and the project's `invoke.yaml` (which names the
``ForwardingExecutor``); `cvs-tasks` needs neither: it is ``invoke.Program`` with the collection
(``namespace()``) and the executor built in. What it adds is an exit status a script can trust:
invoke's own parse errors (an unknown task or flag, a flag without its value) exit 1 under
`invoke`, the status of a failed gate; here they exit 2 (bad input) with a did-you-mean from the
task names or that task's flags. A Ctrl-C outside a stage exits 130, and an error no code path
expected exits 3 with its traceback, never 1. README, "Exit statuses".
"""

from __future__ import annotations

import difflib
import re
import sys
import traceback
from typing import Iterable

from invoke import Program
from invoke.exceptions import Exit, ParseError

from cvs_tasks import __version__
from cvs_tasks.errors import EXIT_BAD_INPUT, EXIT_INFRA
from cvs_tasks.tasks._common import PROGRAM

NAME = "cvs-tasks"
EXIT_INTERRUPTED = 130
UNKNOWN = re.compile(r"^No idea what (['\"])(?P<token>.*)\1 is!$")


def did_you_mean(token: str, choices: Iterable[str]) -> str | None:
    """The closest of ``choices`` to a mistyped ``token`` (difflib), or None when none is close."""
    found = difflib.get_close_matches(token, sorted(set(choices)), n=1, cutoff=0.6)
    return found[0] if found else None


def parse_error_text(message: str, task: str | None, task_names: Iterable[str], flags: Iterable[str]) -> str:
    """invoke's parse error, with a suggestion and where to look.

    ``task`` is the task whose flags were being read (None before the first task name), ``flags``
    its flags (or the program's own before a task name)."""
    match = UNKNOWN.match(message)
    if match is None:  # a flag without its value, an ambiguous value: said as invoke says it
        return message + (f" (`{NAME} --help {task}` shows its flags)" if task else "")
    token = match.group("token")
    if token.startswith("-"):
        guess = did_you_mean(token.split("=", 1)[0], [f for f in flags if f.startswith("--")])
        where = f"`{NAME} --help {task}` shows its flags" if task else f"`{NAME} --help` shows the options"
    else:
        guess = did_you_mean(token, task_names)
        where = f"`{NAME} --help` lists every task"
    hint = f" Did you mean `{guess}`?" if guess else ""
    return f"{NAME}: unknown {'flag' if token.startswith('-') else 'task'} {token!r}.{hint} ({where})"


class CvsProgram(Program):
    """``invoke.Program`` with this collection, the ForwardingExecutor and the exit-status table."""

    def __init__(self) -> None:
        from cvs_tasks.tasks import namespace
        from cvs_tasks.tasks.chain import ForwardingExecutor

        super().__init__(version=__version__, namespace=namespace(), name=NAME, binary=NAME,
                         binary_names=[NAME], executor_class=ForwardingExecutor)

    def _task_names(self) -> list[str]:
        names = []
        for name, aliases in self.collection.task_names.items():
            names += [name, *aliases]
        return names

    def _refused(self, error: ParseError) -> Exit:
        context = error.context
        task = getattr(context, "name", None)
        flags = list(context.flags) if context is not None else list(self.initial_context.flags)
        return Exit(parse_error_text(str(error), task, self._task_names(), flags), code=EXIT_BAD_INPUT)

    def parse_tasks(self) -> None:
        try:
            super().parse_tasks()
        except ParseError as error:
            raise self._refused(error) from None

    def parse_cleanup(self) -> None:
        try:
            super().parse_cleanup()
        except ParseError as error:  # `--help <unknown task>`
            raise self._refused(error) from None

    def execute(self) -> None:
        try:
            super().execute()
        except KeyboardInterrupt:
            raise Exit("interrupted", code=EXIT_INTERRUPTED) from None
        except (Exit, ParseError, SystemExit):
            raise
        except Exception:  # noqa: BLE001 - a bug: its traceback, and never the status of a failed gate
            traceback.print_exc()
            raise Exit(f"{NAME}: internal error (the traceback above); exit {EXIT_INFRA}", code=EXIT_INFRA) from None


def main(argv: list[str] | None = None) -> None:
    """The `cvs-tasks` console script (pyproject ``[project.scripts]``)."""
    PROGRAM[0] = NAME
    CvsProgram().run(argv if argv is None else [NAME, *argv])


if __name__ == "__main__":  # python -m cvs_tasks.tasks.program ...
    main(sys.argv[1:])
