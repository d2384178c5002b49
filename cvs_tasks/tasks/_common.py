"""What every task module shares: turning library errors into a message and an exit status."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator

from invoke.exceptions import Exit

from cvs_tasks.errors import CvsError


@contextmanager
def user_errors() -> Iterator[None]:
    """Run a task body; a CvsError becomes its message on stderr and its exit status, no traceback."""
    try:
        yield
    except CvsError as exc:
        sys.stdout.flush()
        raise Exit(message=str(exc), code=exc.exit_code) from None
