"""What every task module shares: turning library errors into a message and an exit status."""

from __future__ import annotations

import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from invoke.exceptions import Exit

from cvs_tasks.errors import BadInput, CvsError
from cvs_tasks.identifiers import ASCII_DECIMAL
from cvs_tasks.terminal import visible


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
