"""Stopping a job and clearing GPU processes between jobs, with bounded waits instead of sleeps.

The reference killed every KFD pid and then slept a fixed 10 s; here each wait polls and gives up
after a set time, and the job's own process group is stopped first (TERM, then KILL).
"""

from __future__ import annotations

import re
import shlex

from cvs_tasks.jobs.shell import q, say
from cvs_tasks.jobs.spec import NodeLaunch

DEFAULT_PIDS_COMMAND = "rocm-smi --showpids"
NO_PIDS_TEXT = "No KFD PIDs currently running"
NOTHING_TO_KILL = "true"
_PID_ROW = re.compile(r"^\s*(\d+)\b")

# Live (non-zombie) members of process group $1, read from /proc: a container whose PID 1 does not
# reap (sleep infinity) keeps exited members as zombies, which `kill -0` would count as alive.
_GROUP_ALIVE = (
    'cvs_group_alive() { local f s; for f in /proc/[0-9]*/stat; do '
    'read -r s < "$f" 2> /dev/null || continue; s=${s##*) }; set -- $s; '
    '[ "$3" = "$CVS_PG" ] && [ "$1" != Z ] && return 0; done; return 1; }'
)

# Whether any of the given pids is still a live (non-zombie) process.
_ANY_ALIVE = (
    'cvs_any_alive() { local p s; for p in "$@"; do '
    'read -r s < "/proc/$p/stat" 2> /dev/null || continue; s=${s##*) }; '
    '[ "${s%% *}" != Z ] && return 0; done; return 1; }'
)


def gpu_pids_command(configured: str | None = None) -> str:
    """The GPU process listing (``gpu.pids_command``); a node without the tool is not an error."""
    command = (configured or "").strip() or DEFAULT_PIDS_COMMAND
    tool = shlex.split(command)[0]
    return (
        f"if command -v {q(tool)} > /dev/null 2>&1; then {command}; "
        f"else echo {say(f'{tool} not found; GPU process check skipped')} >&2; fi"
    )


def parse_showpids(text: str) -> list[int]:
    """PIDs from ``rocm-smi --showpids``: rows that start with a number; none when it says so."""
    if NO_PIDS_TEXT in text:
        return []
    pids: list[int] = []
    for line in text.splitlines():
        match = _PID_ROW.match(line)
        if match:
            pid = int(match.group(1))
            if pid > 1 and pid not in pids:
                pids.append(pid)
    return pids


def kill_pids_command(pids: list[int], wait_s: int = 30) -> str:
    """``kill -9`` the pids, then wait (at most ``wait_s`` s) until none is left.

    No pid (or only 0/1, which must never be signalled) gives the no-op ``true``.
    """
    safe = [int(p) for p in pids if int(p) > 1]
    if not safe:
        return NOTHING_TO_KILL
    words = " ".join(str(p) for p in safe)
    return (
        f"{_ANY_ALIVE}; kill -9 {words} 2> /dev/null; n=0; "
        f"while cvs_any_alive {words} && [ $n -lt {int(wait_s)} ]; do sleep 1; n=$((n+1)); "
        f"done; true"
    )


def stop_job_command(node: NodeLaunch, grace_s: int = 30) -> str:
    """TERM the wrapper's process group, wait up to ``grace_s`` s, then KILL what is left.

    Bounded, idempotent (no pid file or an already-gone job is fine), and it touches only the
    group recorded in this node's pid file.
    """
    return (
        f"{_GROUP_ALIVE}; CVS_PG=$(cat {q(node.pid_path)} 2> /dev/null); "
        f'case "$CVS_PG" in ""|*[!0-9]*|0|1) echo '
        f"{say(f'no job pid in {node.pid_path}; nothing to stop')} >&2;; "
        f'*) if cvs_group_alive; then kill -TERM -- "-$CVS_PG" 2> /dev/null; n=0; '
        f"while cvs_group_alive && [ $n -lt {int(grace_s)} ]; do sleep 1; n=$((n+1)); done; "
        f'cvs_group_alive && kill -KILL -- "-$CVS_PG" 2> /dev/null; fi;; '
        f"esac; true"
    )
