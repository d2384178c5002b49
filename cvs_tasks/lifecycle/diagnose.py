"""Find the bad node: the smoke cell on every node on its own, in parallel, then the outliers.

Each node gets a one-node view of the run: its own plan with ``NNODES=1`` and ``MASTER_ADDR`` its
own address (for docker the container is relaunched with them, since a container's env is fixed
at creation), a job label of its own so scripts and logs never collide on shared storage, and its
records under ``<run>/diagnose/<host>/``. Afterwards the run's containers are one-node ones:
``run_all`` only tears them down; ``invoke diagnose`` on a live run relaunches the run's own.
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor

from cvs_tasks import runtimes
from cvs_tasks.errors import CvsError
from cvs_tasks.history.outliers import NodeSmoke, find_outliers
from cvs_tasks.lifecycle.jobrun import run_job
from cvs_tasks.lifecycle.jobspec import job_spec, smoke_cell
from cvs_tasks.lifecycle.node_folders import owner_name
from cvs_tasks.lifecycle.runner import Interrupted
from cvs_tasks.lifecycle.session import Session
from cvs_tasks.metrics import catalog
from cvs_tasks.run import NodeOutcome, StageRecord, combo_dir
from cvs_tasks.run.stages import DIAGNOSE as STAGE
from cvs_tasks.run.stages import DOWNLOAD_TOKENIZER, LAUNCH_CONTAINER, METRIC, TRAINING


def wanted_after_training(session: Session) -> bool:
    """``diagnose.auto`` and a distributed combo failed or missed a throughput/scaling gate."""
    if not session.config.diagnose.auto or not session.plan.distributed:
        return False
    speed_gates = catalog.speed_gates()
    for combo in session.plan.combo_ids:
        training = session.run.read_record(TRAINING.id, combo)
        if training is not None and training.status in ("FAIL", "ERROR"):
            return True
        metric = session.run.read_record(METRIC.id, combo)
        if metric is not None and any(r.status == "FAIL" and r.name in speed_gates for r in metric.metrics):
            return True
    return False


def diagnose(session: Session) -> StageRecord:
    """Run, judge and record the per-node smoke (also when earlier stages failed: that is its use)."""
    started = time.time()
    try:
        record = _diagnose(session)
    except Interrupted:
        raise
    except CvsError as exc:
        record = StageRecord(STAGE, "ERROR", reason=session.redactor(str(exc)))
    record.started, record.ended = started, time.time()
    session.run.write_record(record)
    return record


def _diagnose(session: Session) -> StageRecord:
    hosts = list(session.plan.hosts)
    container = session.config.container
    if runtimes.get(container.runtime.name).node_docker and container.lifetime != "per_run":
        return StageRecord(STAGE, "SKIPPED", reason=f"diagnose relaunches each node's container as a one-node "
                           f"container; container.lifetime {container.lifetime!r} keeps the run's own (use per_run)")
    session.say(f"diagnose: the smoke cell on each of {len(hosts)} node(s) on its own")
    with ThreadPoolExecutor(max_workers=max(1, len(hosts)), thread_name_prefix=STAGE) as pool:
        smokes = list(pool.map(lambda i: _node_smoke(session, i), range(len(hosts))))
    found = find_outliers(smokes, session.config.diagnose.tolerance_pct)
    bad = {o["host"]: o["reason"] for o in found.outliers}
    nodes = [NodeOutcome(s.host, i, "FAIL" if s.host in bad else "PASS", bad.get(s.host, s.reason))
             for i, s in enumerate(smokes)]
    record = StageRecord(STAGE, "FAIL" if bad else "PASS", reason=found.summary, nodes=nodes, data=found.to_data())
    for host, why in bad.items():
        session.say(f"diagnose: bad node {host}: {why}", "warning")
    return record


def node_session(session: Session, index: int) -> Session:
    """A one-node view of ``session`` for node ``index`` (same connections, same container)."""
    from cvs_tasks.remote import runtime_for

    host = session.plan.hosts[index]
    env = {**session.plan.env, "NNODES": "1", "MASTER_ADDR": host.address}
    plan = dataclasses.replace(session.plan, mode="single", hosts=(host,), env=env)
    folder = session.run.path / STAGE / combo_dir(host.address) / session.run.run_id  # same run id: same node folder
    run = session.run.child(folder)
    for stage in (LAUNCH_CONTAINER.id, DOWNLOAD_TOKENIZER.id):  # the token and tokenizer the run placed
        rec = session.run.read_record(stage)
        if rec is not None:
            run.write_record(rec)
    hosts = session.hosts().subset([index])
    container = session.config.container
    container = container.model_copy(update={"env": {**container.env, "MASTER_ADDR": host.address}})
    runtime = runtime_for(hosts, container, run_id=session.run.run_id, owner=owner_name(), nnodes=1)
    return Session(plan=plan, run=run, dry_run=session.dry_run, force=True, listener=session.listener,
                   redactor=session.redactor, stop=session.stop, scheduler=session.scheduler, nodes=session.nodes,
                   _hosts=hosts,
                   _runtime=runtime)


def _node_smoke(session: Session, index: int) -> NodeSmoke:
    address = session.plan.hosts[index].address
    try:
        one = node_session(session, index)
        if runtimes.get(one.config.container.runtime.name).node_docker:  # its env holds NNODES/MASTER_ADDR:
            [started] = one.runtime().launch()            # relaunch it as a one-node container
            if not started.ok:
                return NodeSmoke(address, "ERROR", None, None, session.redactor(started.error or "launch failed"))
        mbs, gbs, precision, iters = smoke_cell(one)
        job = job_spec(one, label=f"{STAGE}_{combo_dir(address)}", combo=one.plan.combos[0], mbs=mbs, gbs=gbs,
                       precision=precision, iterations=iters)
        result = run_job(one, job, stage=STAGE, combo=address)
    except Interrupted:
        raise
    except Exception as exc:  # one node's trouble is that node's verdict, not the whole diagnosis
        return NodeSmoke(address, "ERROR", None, None, session.redactor(str(exc)))
    if not result.ok:
        return NodeSmoke(address, "FAIL", None, None, session.redactor(result.reason))
    parser = result.reporting_parser()
    metrics = parser.metrics() if parser is not None else {}
    return NodeSmoke(address, "PASS", _num(metrics.get("training.elapsed_time_per_iteration")),
                     _num(metrics.get("training.tokens_per_gpu")), f"{parser.last_step if parser else '?'} iterations")


def _num(value) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if f == f else None
