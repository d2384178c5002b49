"""A run's Slurm allocation: found or requested when the run first needs its nodes, kept across
the commands of one run, released at teardown.

The allocation is recorded in the run manifest (``slurm``: job id, whether the harness requested
it, the nodes), so ``invoke train`` after ``invoke container`` reuses it, ``invoke teardown`` or
``invoke cleanup`` releases it, and the report names the job. An allocation the harness found
(``SLURM_JOB_ID``, ``scheduler.job_id``) is never cancelled: it belongs to the user.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING

from cvs_tasks.config import HostSpec
from cvs_tasks.plan import with_hosts
from cvs_tasks.remote import slurm_cmd as sc
from cvs_tasks.remote.slurm import Allocation, SlurmClient, SlurmHosts, drain_lines
from cvs_tasks.run.stages import LAUNCH_CONTAINER

if TYPE_CHECKING:
    from cvs_tasks.config.cluster import SchedulerSpec
    from cvs_tasks.lifecycle.session import Session

MANIFEST_KEY = "slurm"


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
    manifest = session.run.manifest()
    manifest[MANIFEST_KEY] = allocation.as_record()
    manifest["hosts"] = [n.name for n in allocation.nodes]
    session.run.write_manifest(manifest)
    session.plan = with_hosts(session.plan, [HostSpec(n.name, n.address) for n in allocation.nodes])
    if allocation.owned:
        session.say(f"Slurm: job {allocation.job_id} holds {', '.join(n.name for n in allocation.nodes)} "
                    "(released at teardown)")
    else:
        session.say(f"Slurm: running in job {allocation.job_id} on {', '.join(n.name for n in allocation.nodes)}")
    return SlurmHosts(client, allocation)


def _reuse(session: Session, client: SlurmClient, quiet: bool = False) -> Allocation | None:
    """The allocation an earlier command of this run recorded, if it still runs."""
    recorded = session.run.manifest().get(MANIFEST_KEY) or {}
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
    recorded = session.run.manifest().get(MANIFEST_KEY) or {}
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


def release(session: Session) -> str | None:
    """scancel the run's allocation if the harness requested it; returns what was done."""
    spec = session.plan.cluster.scheduler
    recorded = session.run.manifest().get(MANIFEST_KEY) or {}
    if spec is None or not recorded.get("job_id"):
        return None
    job_id = str(recorded["job_id"])
    if not recorded.get("owned"):
        return f"Slurm job {job_id} left running (not requested by cvs-tasks)"
    if not SlurmClient(spec.slurm_conf).release(job_id):
        return f"Slurm job {job_id} could not be cancelled; run `scancel {job_id}`"
    manifest = session.run.manifest()
    manifest[MANIFEST_KEY] = {**recorded, "released": True}
    session.run.write_manifest(manifest)
    return f"Slurm job {job_id} released"


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


def judge_nodes(session: Session) -> list[str]:
    """After a Slurm run: print (and with ``drain_failed``, run) the drain line for each bad node."""
    spec = session.plan.cluster.scheduler
    recorded = session.run.manifest().get(MANIFEST_KEY) or {}
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
        manifest = session.run.manifest()
        manifest[MANIFEST_KEY] = {**recorded, "bad_nodes": bad, "drain_lines": lines, "drained": drained}
        session.run.write_manifest(manifest)
    return lines


def job_name(spec: SchedulerSpec, run_id: str) -> str:
    return f"{spec.job_name}-{run_id}"[:128]


def leftover_allocations(spec: SchedulerSpec, user: str, run_id: str | None) -> list[tuple[str, str, str]]:
    """Allocations cvs-tasks requested for this user (one run's, or every run's) still in the queue."""
    client = SlurmClient(spec.slurm_conf)
    prefix = job_name(spec, run_id) if run_id else f"{spec.job_name}-"
    rows = sc.parse_my_jobs(client.check(sc.my_jobs_command(user), "squeue"), prefix)
    return [row for row in rows if not run_id or row[1] == prefix]


def dry_run_lines(session: Session) -> list[str]:
    """What a real run would ask Slurm for, printed by ``--dry-run`` before the node commands."""
    spec = session.plan.cluster.scheduler
    if spec is None:
        return []
    job_id = spec.job_id or os.environ.get("SLURM_JOB_ID")
    if job_id:
        return [f"[dry-run] attach to Slurm job {job_id} (never cancelled by cvs-tasks)"]
    req = request_of(spec, session.plan.nnodes, [h.name for h in session.plan.cluster.hosts], session.run.run_id)
    return ["[dry-run] " + " ".join(sc.salloc_command(req))]
