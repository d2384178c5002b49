"""What one Slurm task runs for its node when the training job is launched as a single srun step.

The job still starts the way it does over SSH (the detached wrapper, its pid file and exit
file), so the watcher, the stop command and the clean-up are the same; the task then waits for
that wrapper, which keeps the step alive exactly as long as the job, so Slurm's accounting, time
limit and ``scancel`` apply to the training. A SIGTERM/SIGINT to the task (scancel, time limit,
the harness stopping srun) runs the harness's own stop command first: a signal to a
``docker exec`` client never reaches the process inside the container.
"""

from __future__ import annotations

from cvs_tasks.jobs.shell import q


def attached_start(launch_command: str, pid_path: str) -> str:
    """The detached launch, then wait for the wrapper (a child of this same shell) to end."""
    return f"{launch_command} && cvs_job=$(cat {q(pid_path)}) && wait \"$cvs_job\""


def step_task(start: str, stop: str) -> str:
    """Run ``start`` in the background; on TERM/INT/HUP run ``stop``; exit with the job's status."""
    on_signal = f"{stop}; kill -TERM $cvs_task 2> /dev/null"
    return (f"{start} & cvs_task=$!; trap {q(on_signal)} TERM INT HUP; "
            f"wait $cvs_task; cvs_status=$?; wait $cvs_task 2> /dev/null; exit $cvs_status")
