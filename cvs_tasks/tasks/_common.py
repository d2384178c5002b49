"""What every task module shares: the short-flag table and the ``task`` decorator that applies it,
turning library errors into a message and an exit status, numeric flags, Invoke's ``cvs.*`` defaults."""

from __future__ import annotations

import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import invoke
from invoke.exceptions import Exit

from cvs_tasks.errors import BadInput, CvsError
from cvs_tasks.identifiers import ASCII_DECIMAL
from cvs_tasks.terminal import visible

# -- one short flag, one meaning, in every task ---------------------------------------------------
# parameter name -> its one-letter flag. A flag not listed here has no short form. Invoke's own rule
# (the first free letter of the name) gave `-c` config in one task and cluster in the next; every
# task here is made with ``task`` below, and tests/unit/lifecycle/test_short_flags.py walks them all.
SHORT_FLAGS: dict[str, str] = {
    "config": "c",
    "cluster": "l",
    "run": "r",
    "suite": "s",
    "combo": "o",
    "force": "f",
    "dry_run": "d",
    "reports_dir": "e",
    "with_pre": "p",
    "exitfirst": "x",
    "json": "j",
    "known_hosts": "k",
    "nodes": "n",
    "all_owners": "a",
    "yes": "y",
    "timeout": "t",
    "quick": "q",
    "with_thresholds": "w",
    "model": "m",
}


class FlagTableTask(invoke.Task):
    """An Invoke task whose short flags come from ``SHORT_FLAGS``, not from the letters still free.

    Invoke uses up a task's help dict while it builds the task's flags; it is kept here, so the
    collection can be parsed more than once in a process (the executor's tests, ``cvs-tasks``)."""

    def get_arguments(self, ignore_unknown_help: bool | None = None) -> list:
        kept = dict(self.help)
        try:
            return super().get_arguments(ignore_unknown_help)
        finally:
            self.help = kept

    def arg_opts(self, name: str, default: str, taken_names: set[str]) -> dict:
        opts = super().arg_opts(name, default, taken_names)
        letter = SHORT_FLAGS.get(name)
        opts["names"] = [opts["names"][0]] + ([letter] if letter else [])
        return opts


def task(*args, **kwargs):
    """``invoke.task`` making a ``FlagTableTask``: use it for every task of this collection."""
    kwargs.setdefault("klass", FlagTableTask)
    return invoke.task(*args, **kwargs)


# the program the user typed, for commands a message suggests (the console script sets it)
PROGRAM = ["invoke"]


def program() -> str:
    return PROGRAM[0]


@contextmanager
def user_errors() -> Iterator[None]:
    """Run a task body; a CvsError becomes its message on stderr and its exit status, no traceback.
    The message may quote node text, so its control characters are shown, not sent (``visible``)."""
    try:
        yield
    except CvsError as exc:
        sys.stdout.flush()
        raise Exit(message=visible(str(exc), keep_newlines=True), code=exc.exit_code) from None


WHOLE = re.compile(r"\A\s*-?[0-9]{1,18}\s*\Z")


def number_flag(flag: str, value: object, default: float, least: float, most: float, *, whole: bool = False,
                above: bool = False, unit: str = "") -> float:
    """A numeric flag's value, or ``default`` when it was not given.

    Invoke shows a traceback for ``abc`` in a flag whose default is a number, so numeric flags
    default to None (read as text) and are checked here: ASCII digits (``float()`` would also take
    'nan', 'inf' and '٣'), within ``least`` (excluded when ``above``) .. ``most``; else BadInput
    (exit 2) naming the flag, e.g. ``--runs: 'abc' is not a whole number``."""
    if value is None or value == "":
        return default
    text = str(value)
    if whole and not WHOLE.match(text):
        raise BadInput(f"--{flag}: {value!r} is not a whole number")
    if not whole and not ASCII_DECIMAL.match(text):
        raise BadInput(f"--{flag}: {value!r} is not a finite number")
    number = int(text) if whole else float(text)
    if number < least or number > most or (above and number == least):
        low = f"above {least:g}" if above else f"at least {least:g}"
        raise BadInput(f"--{flag}: {value!r} is out of range (must be {low} and at most {most:g}{unit})")
    return number


def seconds_flag(flag: str, value: object, default: float) -> float:
    """A ``--<flag> SECONDS`` value: a finite number of seconds in (0, 86400]."""
    return number_flag(flag, value, default, 0, 24 * 3600, above=True, unit=" seconds")


# Invoke configuration the tasks read (`cvs:` in invoke.yaml / ~/.invoke.yaml, or INVOKE_CVS_*).
INVOKE_DEFAULTS = {"cvs": {"config": None, "cluster": None, "reports_dir": None}}


REPORTS_DIR_HELP = ("Folder holding run directories (default: cvs.reports_dir / INVOKE_CVS_REPORTS_DIR, "
                    "$CVS_REPORTS_DIR, else reports)")


def reports_root(c, reports_dir: str | None) -> Path:
    """--reports-dir, else cvs.reports_dir (invoke.yaml / INVOKE_CVS_REPORTS_DIR), $CVS_REPORTS_DIR, reports."""
    return Path(configured(c, "reports_dir", reports_dir) or os.environ.get("CVS_REPORTS_DIR") or "reports")


def configured(c, name: str, value: object) -> object:
    """A flag's value, else ``cvs.<name>`` from Invoke's configuration (None when neither is set).

    Invoke merges that configuration from invoke.yaml (project, user, system) and INVOKE_CVS_*
    environment variables, so `invoke all --config x.json` can take its cluster from
    `cvs: {cluster: ...}` or INVOKE_CVS_CLUSTER without a flag."""
    if value not in (None, ""):
        return value
    config = getattr(c, "config", None)
    section = config.get("cvs") if config is not None else None
    return (section or {}).get(name) or None
