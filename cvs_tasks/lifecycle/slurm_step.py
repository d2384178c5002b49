"""The training job as one Slurm step: started with a task per node, ended with the job.

The watcher follows the job through its logs as over SSH; this only owns srun's process: it
is stopped once the job is over, and what Slurm printed (a time limit, a cancellation, a node
failure) names the cause when the job failed.
"""

from __future__ import annotations

import shlex
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cvs_tasks.jobs import cleanup
from cvs_tasks.jobs.shell import attached_start, step_task
from cvs_tasks.jobs.spec import LaunchPlan
from cvs_tasks.lifecycle.watch import WatchOutcome
from cvs_tasks.remote import slurm_cmd as sc
from cvs_tasks.remote.slurm import SlurmHosts

ENDING_WAIT_S = 15.0
STOP_WAIT_S = 45.0  # the task's own trap runs the job's stop command (30 s grace) first


def node_tasks(runtime, launch: LaunchPlan) -> list[str]:
    """Per node, the task command: the usual launch, attached, with the usual stop on a signal."""
    return [step_task(runtime.command(attached_start(n.launch_command, n.pid_path)),
                      runtime.command(cleanup.stop_job_command(n)))
            for n in launch.nodes]


def dry_run_step_line(runtime, launch: LaunchPlan, names: list[str]) -> str:
    """The srun line a real run would start (the allocation's job id is not known yet)."""
    argv = sc.spread_command("<allocation>", names, dict(zip(names, node_tasks(runtime, launch))),
                             getattr(runtime.hosts, "step_args", ()))
    return "[dry-run] " + " ".join(shlex.quote(a) for a in argv).replace("'--jobid=<allocation>'",
                                                                       "--jobid=<allocation>")


@dataclass
class SlurmStep:
    process: subprocess.Popen
    output: Path
    cause: str | None = None  # what Slurm said ended the step (time limit, scancel, node failure)

    @classmethod
    def start(cls, hosts: SlurmHosts, runtime, launch: LaunchPlan, output: Path) -> "SlurmStep":
        return cls(hosts.spread(node_tasks(runtime, launch), output), output)

    def finish(self, outcome: WatchOutcome | None) -> None:
        """Stop srun if the job outlived the watch (bounded), and name Slurm's cause on a failure."""
        if outcome is not None and outcome.ok:
            try:  # every wrapper has exited: the tasks end on their own
                self.process.wait(timeout=ENDING_WAIT_S)
            except subprocess.TimeoutExpired:
                pass
        if self.process.poll() is None:
            try:
                self.process.send_signal(signal.SIGTERM)  # srun forwards it to every task
                self.process.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
            except ProcessLookupError:
                pass
        if outcome is not None and not outcome.ok:
            self.cause = sc.step_failure(self.text())
            if self.cause and self.cause not in outcome.reason:
                outcome.reason = f"Slurm: {self.cause}; {outcome.reason}"

    def text(self) -> str:
        try:
            return self.output.read_text(encoding="utf-8", errors="replace")[-20000:]
        except OSError:
            return ""
