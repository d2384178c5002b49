"""The Slurm scheduler: a run's allocation, found or requested when the run first needs its nodes,
kept across the commands of one run, released at teardown; the training job as one srun step.

The allocation is recorded in the run manifest (``slurm``: job id, whether the harness requested
it, the nodes), so ``invoke train`` after ``invoke container`` reuses it, ``invoke teardown`` or
``invoke cleanup`` releases it, and the report names the job. An allocation the harness found
(``SLURM_JOB_ID``, ``scheduler.job_id``) is never cancelled: it belongs to the user.

The job is one step with a task per node (``SlurmStep``): the watcher follows it through its logs
as over SSH; the step only owns srun's process: it is stopped once the job is over, and what Slurm
printed (a time limit, a cancellation, a node failure) names the cause when the job failed.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from cvs_tasks import runtimes
from cvs_tasks.config import HostSpec
from cvs_tasks.errors import BadInput
from cvs_tasks.jobs import cleanup
from cvs_tasks.jobs.shell import attached_start, step_task
from cvs_tasks.plan import with_hosts
from cvs_tasks.remote import slurm_cmd as sc
from cvs_tasks.remote.slurm import Allocation, SlurmClient, SlurmHosts, drain_lines
from cvs_tasks.run.stages import LAUNCH_CONTAINER
from cvs_tasks.schedulers import Scheduler

if TYPE_CHECKING:
    from cvs_tasks.config import Cluster, Suite
    from cvs_tasks.config.cluster import SchedulerSpec
    from cvs_tasks.jobs.spec import LaunchPlan
    from cvs_tasks.lifecycle.leftovers import CleanupOutcome
    from cvs_tasks.lifecycle.session import Session
    from cvs_tasks.lifecycle.watch import WatchOutcome

ENDING_WAIT_S = 15.0
STOP_WAIT_S = 45.0  # the task's own trap runs the job's stop command (30 s grace) first


class SlurmNodes(Scheduler):
    """The run's Slurm allocation: found or requested when first needed, released at teardown."""

    name = "slurm"  # also the run manifest's key for the allocation
    label = "Slurm"
    assigns_nodes = True

    def acquire(self, session: Session) -> SlurmHosts:
        hosts = slurm_hosts(session)
        assert hosts is not None  # only a teardown finds no allocation
        return hosts

    def hosts_for_teardown(self, session: Session) -> SlurmHosts | None:
        """Asked afresh: the allocation may have ended meanwhile (then re-acquired briefly)."""
        return slurm_hosts(session, for_teardown=True)

    def release(self, session: Session) -> str | None:
        """scancel the run's allocation if the harness requested it; returns what was done."""
        spec = session.plan.cluster.scheduler
        recorded = self.recorded(session)
        if spec is None or not recorded.get("job_id"):
            return None
        job_id = str(recorded["job_id"])
        if not recorded.get("owned"):
            return f"Slurm job {job_id} left running (not requested by cvs-tasks)"
        if not SlurmClient(spec.slurm_conf).release(job_id):
            return f"Slurm job {job_id} could not be cancelled; run `scancel {job_id}`"
        self.remember(session, {**recorded, "released": True})
        return f"Slurm job {job_id} released"

    def launch(self, session: Session, launch: LaunchPlan, output_dir: Path) -> SlurmStep:
        """One srun step with a task per node; srun's own output goes to ``srun.log`` in ``output_dir``."""
        runtime = session.runtime()
        hosts = runtime.hosts  # with pyxis: steps inside the run's container
        assert isinstance(hosts, SlurmHosts)
        return SlurmStep.start(hosts, runtime, launch, session.run.prepare_file(output_dir / "srun.log"))

    def dry_run_lines(self, session: Session) -> list[str]:
        spec = session.plan.cluster.scheduler
        assert spec is not None
        job_id = spec.job_id or os.environ.get("SLURM_JOB_ID")
        if job_id:
            return [f"[dry-run] attach to Slurm job {job_id} (never cancelled by cvs-tasks)"]
        req = request_of(spec, session.plan.nnodes, [h.name for h in session.plan.cluster.hosts], session.run.run_id)
        return ["[dry-run] " + " ".join(sc.salloc_command(req))]

    def dry_run_launch_lines(self, session: Session, launch: LaunchPlan) -> list[str]:
        return [dry_run_step_line(session.runtime(), launch, [h.name for h in session.plan.hosts])]

    def judge_nodes(self, session: Session) -> list[str]:
        """Print (and with ``drain_failed``, run) the drain line for each node the run blames."""
        spec = session.plan.cluster.scheduler
        recorded = self.recorded(session)
        if spec is None or not recorded.get("nodes"):
            return []
        names = {n["address"]: n["name"] for n in recorded["nodes"]}
        bad = judged_bad(session.run.records(), names)
        lines = drain_lines(bad)
        for line in lines:
            session.say(f"Slurm: bad node; to take it out of service: {line}", "warning")
        drained = []
        if bad and spec.drain_failed:
            client = SlurmClient(spec.slurm_conf)
            for name, why in bad.items():
                done = client.run(sc.drain_argv(name, f"cvs-tasks: {why}"[:200]))
                drained.append(name if done.returncode == 0 else f"{name} (drain failed: {done.stderr.strip()[-200:]})")
            session.say(f"Slurm: drained {', '.join(drained)} (scheduler.drain_failed)", "warning")
        if bad:
            self.remember(session, {**recorded, "bad_nodes": bad, "drain_lines": lines, "drained": drained})
        return lines

    def cleanup(self, cluster: Cluster, where: dict[str, Any], *, dry_run: bool,
                say: Callable[[str], None]) -> CleanupOutcome:
        """Every allocation cvs-tasks requested and nobody released; what runs inside it is removed
        through a step of that allocation, then the allocation is cancelled."""
        from cvs_tasks.lifecycle.leftovers import (
            CleanupOutcome,
            LeftoverReport,
            owner_name,
            remove_found,
            scan_leftovers,
        )

        spec = cluster.scheduler
        assert spec is not None
        client = SlurmClient(spec.slurm_conf)
        problems: list[str] = []
        run_id = where["run_id"]
        jobs = leftover_allocations(spec, where["owner"] or owner_name(), run_id)
        if not jobs:
            say("no leftover Slurm allocations" + (f" for run {run_id}" if run_id else ""))
        for job_id, name, state in jobs:
            say(f"Slurm job {job_id} ({name}): {state}" + (" — would be cancelled" if dry_run else ""))
            if dry_run:
                continue
            if state == "RUNNING":
                hosts = SlurmHosts(client, client.attach(job_id))
                inside = scan_leftovers(hosts, **where)
                for line in inside.lines() + inside.kept_lines():
                    say(line)
                problems += remove_found(hosts, inside, scripts_dir=where["scripts_dir"], log_dir=where["log_dir"],
                                         record=[])
            if client.release(job_id):
                say(f"cancelled Slurm job {job_id}")
            else:
                problems.append(f"could not cancel Slurm job {job_id}; run `scancel {job_id}`")
        return CleanupOutcome(LeftoverReport(), None if dry_run else LeftoverReport(), problems, [])

    def placeholders(self, cluster: Cluster) -> tuple[HostSpec, ...]:
        count = cluster.scheduler.nodes if cluster.scheduler and cluster.scheduler.nodes else 0
        return tuple(HostSpec(name=f"slurm-node{i}", address=f"slurm-node{i}") for i in range(count))

    def check_runtime(self, suite: Suite, cluster: Cluster) -> None:
        """``scheduler.container`` and the suite's runtime must say the same thing."""
        spec = cluster.scheduler
        assert spec is not None
        actual = suite.config.container.runtime.name
        wanted = runtimes.for_scheduler(spec.container).name
        if actual != wanted:
            raise BadInput(f"{cluster.path}: scheduler.container is {spec.container!r} but "
                           f"{suite.config_path} runs container.runtime.name {actual!r}; "
                           f"set container.runtime.name to {wanted!r} or scheduler.container to match")


def request_of(spec: SchedulerSpec, nodes: int, node_names: list[str], run_id: str) -> sc.AllocationRequest:
    return sc.AllocationRequest(
        nodes=nodes, job_name=job_name(spec, run_id), partition=spec.partition, account=spec.account,
        time=spec.time, reservation=spec.reservation,
        nodelist=",".join(node_names) if node_names else spec.nodelist, exclude=spec.exclude,
        wait_s=spec.allocation_wait_s)


def slurm_hosts(session: Session, *, for_teardown: bool = False) -> SlurmHosts | None:
    """The run's allocation as Hosts; the session's plan is re-bound to the allocated nodes.

    ``for_teardown``: reuse the run's live allocation; if it has ended (cancelled, time limit),
    briefly re-acquire the same nodes to remove what outlives a Slurm job there (containers, the
    node folder holding the token). None when the run never had an allocation.
    """
    spec = session.plan.cluster.scheduler
    assert spec is not None
    client = SlurmClient(spec.slurm_conf)
    allocation = _reuse(session, client, quiet=for_teardown)
    if allocation is None and for_teardown:
        allocation = _reacquire(session, client, spec)
        if allocation is None:
            return None
    elif allocation is None:
        allocation = _find_or_request(session, client, spec)
    SLURM.remember(session, allocation.as_record(), hosts=[n.name for n in allocation.nodes])
    session.plan = with_hosts(session.plan, [HostSpec(n.name, n.address) for n in allocation.nodes])
    if allocation.owned:
        session.say(f"Slurm: job {allocation.job_id} holds {', '.join(n.name for n in allocation.nodes)} "
                    "(released at teardown)")
    else:
        session.say(f"Slurm: running in job {allocation.job_id} on {', '.join(n.name for n in allocation.nodes)}")
    return SlurmHosts(client, allocation)


def _reuse(session: Session, client: SlurmClient, quiet: bool = False) -> Allocation | None:
    """The allocation an earlier command of this run recorded, if it still runs."""
    recorded = SLURM.recorded(session)
    job_id = recorded.get("job_id")
    if not job_id or recorded.get("released"):
        return None
    info = client.job(str(job_id))
    if info is None or not info.running:
        if not quiet:
            session.say(f"Slurm: job {job_id} of this run has ended ({info.state if info else 'gone'}); "
                        "requesting a new allocation", "warning")
        return None
    found = client.attach(str(job_id), expected=session.plan.nnodes)
    return Allocation(found.job_id, found.nodes, bool(recorded.get("owned")))


def _reacquire(session: Session, client: SlurmClient, spec: SchedulerSpec) -> Allocation | None:
    recorded = SLURM.recorded(session)
    names = [n["name"] for n in recorded.get("nodes", [])]
    if not names or not recorded.get("owned") or recorded.get("released"):
        return None
    session.say(f"Slurm: job {recorded.get('job_id')} has ended; taking {', '.join(names)} for a few minutes "
                "to remove what the run left there")
    req = request_of(spec, len(names), names, session.run.run_id)
    return client.request(replace(req, time="5", wait_s=min(spec.allocation_wait_s, 60)))


def _find_or_request(session: Session, client: SlurmClient, spec: SchedulerSpec) -> Allocation:
    job_id = spec.job_id or os.environ.get("SLURM_JOB_ID")
    if job_id:
        return client.attach(job_id, expected=session.plan.nnodes)
    names = [h.name for h in session.plan.cluster.hosts]
    return client.request(request_of(spec, session.plan.nnodes, names, session.run.run_id))


def judged_bad(records, names_by_address: dict[str, str]) -> dict[str, str]:
    """Nodes a run blames by name: the node of a failure's root-cause line, a node whose launch
    failed. Peers that only echoed the failure are not blamed."""
    bad: dict[str, str] = {}
    for rec in records:
        if rec.status not in ("FAIL", "ERROR"):
            continue
        error = rec.data.get("error") or {}
        if error.get("host"):
            host = names_by_address.get(error["host"], error["host"])
            bad.setdefault(host, f"{rec.name}: {error.get('cls') or error.get('name') or 'failed'}")
        if rec.stage == LAUNCH_CONTAINER.id:
            for node in rec.nodes:
                if node.status != "PASS":
                    bad.setdefault(names_by_address.get(node.host, node.host), f"{rec.name}: {node.reason[:120]}")
    return bad


def job_name(spec: SchedulerSpec, run_id: str) -> str:
    return f"{spec.job_name}-{run_id}"[:128]


def leftover_allocations(spec: SchedulerSpec, user: str, run_id: str | None) -> list[tuple[str, str, str]]:
    """Allocations cvs-tasks requested for this user (one run's, or every run's) still in the queue."""
    client = SlurmClient(spec.slurm_conf)
    prefix = job_name(spec, run_id) if run_id else f"{spec.job_name}-"
    rows = sc.parse_my_jobs(client.check(sc.my_jobs_command(user), "squeue"), prefix)
    return [row for row in rows if not run_id or row[1] == prefix]


# -- the job as one srun step ------------------------------------------------------------------
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


SLURM = SlurmNodes()
