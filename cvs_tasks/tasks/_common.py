"""What every task module shares: turning library errors into a message and an exit status."""

from __future__ import annotations

import os
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


def seconds_flag(flag: str, value: object, default: float) -> float:
    """A ``--<flag> SECONDS`` value: a finite positive number (invoke would show a traceback for
    `abc` in an int flag, so these flags are read as text and checked here, exit 2)."""
    if value is None:
        return default
    text = str(value)
    seconds = float(text) if ASCII_DECIMAL.match(text) else float("nan")
    if not (0 < seconds <= 24 * 3600):
        raise BadInput(f"--{flag} must be a number of seconds between 0 and 86400, not {value!r}")
    return seconds


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
