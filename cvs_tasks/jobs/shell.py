"""Shell fragments shared by the wrapper scripts and node commands, and how a wrapper is started.

Every value that comes from config is quoted here, once, so a path with a space or a stray quote
cannot change what a command does.

A wrapper starts detached in its own session (``detached_start``: pid file, exit file), so the
watcher, the stop command and the clean-up are the same everywhere. When the job is launched as a
single srun step, each Slurm task starts it the same way and then waits for it (``attached_start``,
``step_task``), which keeps the step alive exactly as long as the job, so Slurm's accounting, time
limit and ``scancel`` apply to the training. A SIGTERM/SIGINT to the task (scancel, time limit,
the harness stopping srun) runs the harness's own stop command first: a signal to a
``docker exec`` client never reaches the process inside the container.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

ENV_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")

# Where the reference looks for the HIP runtime when paths.rocm_dir is not set
# (docs/reference_suite.md#rocm-path-detection).
ROCM_CORE_GLOB = "/opt/rocm/core-*"
ROCM_DEFAULT = "/opt/rocm"
HIP_LIBRARY = "libamdhip64.so"


def q(value: object) -> str:
    """Shell-quote one word (no quotes added when none are needed)."""
    return shlex.quote(str(value))


def comment(text: str) -> str:
    """A ``# …`` line whose text cannot end the comment: anything but printable ASCII is escaped
    (a newline in a label would otherwise start a command of its own)."""
    safe = "".join(ch if " " <= ch <= "~" else ch.encode("unicode_escape").decode("ascii") for ch in text)
    return f"# {safe}"


def say(message: str) -> str:
    """One quoted ``cvs-tasks: …`` word for ``echo … >&2``: config text cannot break the command."""
    return q(f"cvs-tasks: {message}")


def hf_token_export(token_path: str) -> str:
    """Export HF_TOKEN read from the node's token file when the script runs.

    The token text never appears in a script, a command line or the docker exec environment.
    """
    return f'export HF_TOKEN="$(cat {q(token_path)})"'


def rocm_dir_is_set(rocm_dir: str) -> bool:
    """paths.rocm_dir empty or still `<changeme>` means: detect it on the node."""
    return bool(rocm_dir.strip()) and "<changeme>" not in rocm_dir


def rocm_detect_lines(var: str) -> list[str]:
    """Set shell variable ``var`` to the ROCm dir found on the node, warning on a guess
    (docs/reference_suite.md#rocm-path-detection).

    Highest version-sorted /opt/rocm/core-* whose lib/ holds libamdhip64.so*, else /opt/rocm.
    """
    return [
        f"{var}=",
        f"for cvs_candidate in $(printf '%s\\n' {ROCM_CORE_GLOB} | sort -rV); do",
        f'  if compgen -G "$cvs_candidate/lib/{HIP_LIBRARY}*" > /dev/null; then '
        f'{var}="$cvs_candidate"; break; fi',
        "done",
        f'if [ -z "${var}" ]; then',
        f"  {var}={ROCM_DEFAULT}",
        f'  compgen -G "{ROCM_DEFAULT}/lib/{HIP_LIBRARY}*" > /dev/null || echo '
        + say(f"warning: {HIP_LIBRARY} not found under {ROCM_CORE_GLOB}/lib or "
              f"{ROCM_DEFAULT}/lib; using {ROCM_DEFAULT} (set paths.rocm_dir)")
        + " >&2",
        "fi",
    ]


def env_export_lines(env: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """``export K=V`` per env entry (sorted for stable scripts); invalid names become warnings."""
    lines: list[str] = []
    warnings: list[str] = []
    for key in sorted(env):
        if not ENV_NAME.match(key):
            warnings.append(
                f"container.env.{key}: not a valid environment variable name; "
                f"not exported by the host-runtime wrapper"
            )
            continue
        lines.append(f"export {key}={q(env[key])}")
    return lines, warnings


def finish_function(exit_path: str) -> list[str]:
    """A ``cvs_finish STATUS`` helper: record the status atomically, then exit with it.

    Written via a temp file + rename so the watcher never reads a half-written status. TERM/INT
    (a stop request) still records a status once the foreground job has gone.
    """
    tmp = q(exit_path + ".tmp")
    return [
        f'cvs_finish() {{ echo "$1" > {tmp} && mv -f {tmp} {q(exit_path)}; exit "$1"; }}',
        "trap 'cvs_finish 143' TERM",
        "trap 'cvs_finish 130' INT",
    ]


def detached_start(script_path: str, node_dir: str, console_path: str, exit_path: str,
                   pid_path: str) -> str:
    """Start the wrapper in its own session, detached, and return at once (pid -> pid file).

    The braces keep ``&`` scoped to the launch itself, so ``$!`` is the wrapper's pid, which is
    also its process group (setsid in a non-interactive shell does not fork).
    """
    return (
        f"mkdir -p {q(node_dir)} && rm -f {q(exit_path)} {q(pid_path)} && "
        f"{{ setsid nohup bash {q(script_path)} > {q(console_path)} 2>&1 < /dev/null & "
        f"echo $! > {q(pid_path)}; }}"
    )


def attached_start(launch_command: str, pid_path: str) -> str:
    """The detached launch, then wait for the wrapper (a child of this same shell) to end."""
    return f"{launch_command} && cvs_job=$(cat {q(pid_path)}) && wait \"$cvs_job\""


def step_task(start: str, stop: str) -> str:
    """Run ``start`` in the background; on TERM/INT/HUP run ``stop``; exit with the job's status."""
    on_signal = f"{stop}; kill -TERM $cvs_task 2> /dev/null"
    return (f"{start} & cvs_task=$!; trap {q(on_signal)} TERM INT HUP; "
            f"wait $cvs_task; cvs_status=$?; wait $cvs_task 2> /dev/null; exit $cvs_status")
