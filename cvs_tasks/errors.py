"""One exception type per kind of failure, each mapped to one exit status here.

0 all gates passed, 1 a gate failed, 2 bad input (config, cluster, flags),
3 infrastructure failure (SSH, Docker, timeouts).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INFRA = 3


class CvsError(Exception):
    """Base of every error the user is meant to read (never shown with a traceback)."""

    exit_code = EXIT_INFRA


class BadInput(CvsError):
    """A file, field or flag the user gave is wrong; the message says where and what to do."""

    exit_code = EXIT_BAD_INPUT


class InfraError(CvsError):
    """SSH, Docker, a node or a timeout failed; the message names the node."""

    exit_code = EXIT_INFRA


class GateFailed(CvsError):
    """The run completed but at least one gate failed."""

    exit_code = EXIT_GATE_FAILED
