"""The one Slurm behaviour that takes a real minute: a step ended by the allocation's time limit.

Slurm enforces time limits in whole minutes and checks them every 30 s, so the step dies 60-90 s
after it starts, whatever the test does. Waiting for that inside the test cost the suite about
85 s. Instead, when the test is selected, the root conftest starts the step as soon as collection
ends (`start`), on a one-node Slurm cluster of its own (other ports and address than the
integration cluster, so it holds no node another test needs). The test runs minutes later and
only reads what happened: srun's exit and its output. Run alone, it simply waits.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

ADDRESS = "127.0.0.63"
CTLD_PORT = 26827
FIRST_PORT = 27011


@dataclass
class TimeLimitedStep:
    """A one-node allocation with a one-minute limit and a step that outlives it (`sleep 600`)."""

    root: Path
    client: object | None = None
    job_id: str | None = None
    step: object | None = None  # lifecycle.slurm_nodes.SlurmStep
    error: str | None = None  # why the step could not be started: the test fails with it


_started: TimeLimitedStep | None = None


def start() -> TimeLimitedStep:
    """Bring the cluster up, allocate with `--time=1` and start the step; idempotent."""
    global _started
    if _started is not None:
        return _started
    from cvs_tasks.lifecycle.slurm_nodes import SlurmStep
    from cvs_tasks.remote import slurm_cmd as sc
    from cvs_tasks.remote.slurm import SlurmClient, SlurmHosts
    from testbed import slurm

    # not under pytest's 0700 tmp folder: the munge user must reach munged's socket directory
    root = Path(tempfile.mkdtemp(prefix="cvs-slurm-time-limit-"))
    root.chmod(0o755)
    _started = TimeLimitedStep(root)
    problems = slurm.check_prerequisites()
    if problems:
        _started.error = "Slurm prerequisites missing:\n  " + "\n  ".join(problems)
        return _started
    try:
        conf = slurm.up(root, [ADDRESS], ["unix:///nonexistent/n0.sock"], ctld_port=CTLD_PORT,
                        first_port=FIRST_PORT, log=lambda _: None)
        client = SlurmClient(str(conf))
        alloc = client.request(sc.AllocationRequest(nodes=1, job_name="cvs-test", time="1", wait_s=30))
        _started.client, _started.job_id = client, alloc.job_id
        output = root / "srun.log"
        _started.step = SlurmStep(SlurmHosts(client, alloc).spread(["sleep 600"], output), output)
    except Exception as exc:  # reported by the test that needs it, not as a collection error
        _started.error = f"{type(exc).__name__}: {exc}"
    return _started


def stop() -> None:
    """Release the allocation, stop the cluster's daemons and remove its folder (if started)."""
    global _started
    if _started is None:
        return
    from testbed import slurm

    started, _started = _started, None
    try:
        if started.step is not None and started.step.process.poll() is None:
            started.step.process.kill()
            started.step.process.wait(timeout=10)
        if started.client is not None and started.job_id is not None:
            started.client.release(started.job_id)
    finally:
        slurm.down(started.root)
        shutil.rmtree(started.root, ignore_errors=True)
