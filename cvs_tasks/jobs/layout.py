"""Where a job's files live on the nodes: logs per combo and node, scripts per run and label.

Logs follow docs/product.md#node-log-layout (`<log_dir>/{megatron|primus}-logs/<combo-dir>/out-node<N>/`).
Scripts, pid and exit files are kept per run id and label, so parallel or repeated runs never
overwrite each other's (the reference reused one wrapper path for everything).
"""

from __future__ import annotations

from cvs_tasks.jobs.shell import q
from cvs_tasks.jobs.spec import JobSpec
from cvs_tasks.run.records import combo_dir

LOG_FILE = "training.log"
CONSOLE_FILE = "console.log"


def _join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/") or "/", *parts]).replace("//", "/")


def combo_log_dir(job: JobSpec) -> str:
    return _join(job.log_dir, f"{job.backend}-logs", combo_dir(job.label))


def node_dir(job: JobSpec, rank: int) -> str:
    return _join(combo_log_dir(job), f"out-node{rank}")


def node_log_path(job: JobSpec, rank: int) -> str:
    return _join(node_dir(job, rank), LOG_FILE)


def run_scripts_dir(job: JobSpec) -> str:
    return _join(job.scripts_dir, combo_dir(job.run_id), combo_dir(job.label))


def script_path(job: JobSpec, rank: int) -> str:
    return _join(run_scripts_dir(job), f"node{rank}.sh")


def exit_path(job: JobSpec, rank: int) -> str:
    return _join(run_scripts_dir(job), f"node{rank}.exit")


def pid_path(job: JobSpec, rank: int) -> str:
    return _join(run_scripts_dir(job), f"node{rank}.pid")


def prepare_commands(job: JobSpec) -> list[str]:
    """Run on every node's host (as the user who writes the scripts) before writing them."""
    scripts = run_scripts_dir(job)
    stale = " ".join(q(_join(node_dir(job, r), name)) for r in range(job.nnodes) for name in (LOG_FILE, CONSOLE_FILE))
    return [
        f"(umask 077 && mkdir -p {q(scripts)})",
        f"mkdir -p {q(combo_log_dir(job))}",
        # an earlier run's log of this combo must not be read as this one's before the job starts
        f"rm -f -- {stale}",
    ]
