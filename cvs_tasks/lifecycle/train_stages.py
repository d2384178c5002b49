"""Stages that train: smoke, one training combo, and the Primus checkpoint save/resume test."""

from __future__ import annotations

import dataclasses
import math

from cvs_tasks import backends
from cvs_tasks import metrics as m
from cvs_tasks.config.placeholders import fill_run_id
from cvs_tasks.history.entry import args_hash
from cvs_tasks.jobs import checkpoint as ckpt
from cvs_tasks.jobs import primus
from cvs_tasks.jobs.spec import JobSetupError
from cvs_tasks.judge.loss import checkpoint_continuity, judge_convergence
from cvs_tasks.judge.reference import reference_numbers
from cvs_tasks.judge.scaling import scaling_efficiency
from cvs_tasks.lifecycle.health import apply_health
from cvs_tasks.lifecycle.jobrun import JobResult, primus_experiment, run_job
from cvs_tasks.lifecycle.jobspec import job_spec, smoke_cell
from cvs_tasks.lifecycle.session import Session
from cvs_tasks.run import NodeOutcome, StageRecord
from cvs_tasks.run.records import StepRow
from cvs_tasks.run.stages import CHECKPOINT, SMOKE, TRAINING
from cvs_tasks.verify.compare import effective_record


def _node_outcomes(session: Session, result: JobResult, stage_status: str) -> list[NodeOutcome]:
    """Every node with an outcome: a node that exited non-zero, left no exit status or whose log
    never arrived counts as failed, also when another node saw the job complete."""
    if result.outcome is None:
        return []
    out = []
    for n in result.outcome.nodes:
        local = n.target.local_copy
        log = session.run.relative(local) if local and local.exists() else None
        problems = [f"exit {n.exit_code}"] if n.exit_code not in (None, 0) else []
        if n.exit_code is None:
            problems.append("no exit status")
        if log is None:
            problems.append("no log")
        failed = n.state == "failed" or bool(problems)
        status = "FAIL" if failed else ("PASS" if stage_status == "PASS" else stage_status)
        if n.state in ("failed", "stalled"):
            problems.insert(0, n.state)
        reason = ", ".join(problems) if problems else f"exit {n.exit_code}"
        out.append(NodeOutcome(host=n.target.host, rank=n.target.rank, status=status, reason=reason,
                               last_step=n.last_step, planned=n.planned, log=log))
    return out


def _job_record(session: Session, result: JobResult) -> StageRecord:
    """PASS when the job completed; FAIL when it failed on the cluster; ERROR when we lost a node."""
    if result.setup_failure:
        status = "FAIL"
    elif result.outcome is None:
        status = "SKIPPED"  # dry run
    elif result.outcome.ok:
        status = "PASS"
    elif result.outcome.infrastructure:
        status = "ERROR"
    else:
        status = "FAIL"
    record = StageRecord.result(status, session.redactor(result.reason))
    if status == "SKIPPED":
        record.reason = "dry run: nothing was started"
    record.nodes = _node_outcomes(session, result, status)
    failed_nodes = [node for node in record.nodes if node.status == "FAIL"]
    if status == "PASS" and failed_nodes:  # completed on one node is not completed on every node
        record.status = "FAIL"
        record.reason = f"{record.reason}; but " + "; ".join(f"node {n.host}: {n.reason}" for n in failed_nodes)
    for node in record.nodes:
        if node.log:
            record.artifacts[f"node {node.rank} log ({node.host})"] = node.log
    if result.outcome is not None:
        if result.outcome.error:
            record.data["error"] = {k: session.redactor(str(v)) if isinstance(v, str) else v
                                    for k, v in result.outcome.error.items()}
        if record.status != "PASS":
            record.data["log_tail"] = [session.redactor(line) for line in result.outcome.tail]
        record.data.update(effective_record(result.outcome.config_check, result.outcome.warnings))
        for warning in result.outcome.warnings:
            session.say(f"warning: {warning}", "warning")
    if result.notes:
        record.data["notes"] = result.notes
    apply_health(record, result.health)
    return record


def smoke(session: Session, combo: str | None = None) -> StageRecord:
    if not session.config.smoke.enabled:
        return StageRecord.result("SKIPPED", "smoke.enabled is false")
    mbs, gbs, precision, iters = smoke_cell(session)
    job = job_spec(session, label=SMOKE.id, combo=session.plan.combos[0], mbs=mbs, gbs=gbs, precision=precision,
                   iterations=iters)
    result = run_job(session, job, stage=SMOKE.id, combo=None)
    record = _job_record(session, result)
    if record.status == "PASS":
        parser = result.reporting_parser()
        record.reason = f"{parser.last_step}/{parser.planned or iters} iterations, MBS={mbs} GBS={gbs} {precision}"
    return record


def training(session: Session, combo_id: str | None) -> StageRecord:
    combo = session.plan.combo(combo_id)
    job = job_spec(session, label=combo.id, combo=combo)
    result = run_job(session, job, stage=TRAINING.id, combo=combo.id)
    record = _job_record(session, result)
    parser = result.reporting_parser()
    if parser is None:
        return record
    record.data.update(_training_data(session, parser, result))
    if record.status == "PASS":
        tput = record.data["metrics"].get("training.throughput_per_gpu")
        record.reason = (f"{parser.last_step}/{parser.planned} iterations"
                         + (f", {tput:.1f} TFLOP/s/GPU" if tput else ""))
    return record


def _finite(x):
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def _training_data(session: Session, parser, result: JobResult) -> dict:
    cfg = session.config
    iterations = list(parser.iterations.values())
    metrics = {k: _finite(v) for k, v in parser.metrics().items()}
    data = {
        "metrics": metrics,
        "last_step": parser.last_step,
        "planned": parser.planned,
        "completed": bool(parser.completed),
        "dialect": parser.dialect,
        "steps": [StepRow(it.step, _finite(it.elapsed_ms), _finite(it.tflops), _finite(it.tokens_per_gpu),
                          _finite(it.loss)).to_list() for it in iterations],
        "tflops_recomputed": _finite(parser.tflops_recomputed()),
        "scaling_efficiency_pct": None,
        "args_hash": args_hash(getattr(getattr(parser, "facts", None), "args", None)),  # provenance (history)
    }
    base = cfg.scaling_baseline
    tokens = metrics.get("training.tokens_per_gpu")
    effective = result.outcome.config_check.effective if result.outcome and result.outcome.config_check else None
    nnodes = (effective.nnodes if effective else None) or session.plan.nnodes  # the nodes that trained together
    if session.plan.distributed and tokens and base.tokens_per_sec_total > 0:
        data["scaling_efficiency_pct"] = scaling_efficiency(
            tokens, nnodes, cfg.gpus_per_node, base.tokens_per_sec_total, base.num_nodes
        )
    facts = getattr(parser, "facts", None)
    data["reference_metrics"] = reference_numbers(iterations, dict(getattr(facts, "launcher_summary", None) or {}),
                                                  session.plan.backend, parser.dialect)
    eval_losses = dict(getattr(getattr(parser, "facts", None), "eval_losses", None) or {})
    data["eval_losses"] = [[s, v] for s, v in sorted(eval_losses.items()) if math.isfinite(v)]
    conv = judge_convergence([(s[0], s[1], s[4]) for s in data["steps"]], eval_losses,
                             cfg.convergence.target_metric, cfg.convergence.target_value)
    if conv is not None:
        data["convergence"] = conv.to_dict()
        if conv.steps_to_target is not None:
            data["steps_to_target"], data["time_to_target_seconds"] = conv.steps_to_target, conv.time_to_target_seconds
    return data


def checkpoint(session: Session, combo: str | None = None) -> StageRecord:
    """Primus save phase, then resume phase: the resume starts at last checkpoint + 1 with continuous loss."""
    cfg = session.config
    if not backends.get(session.plan.backend).checkpoint_test:
        return StageRecord.result("SKIPPED", f"checkpoint test is {backends.labels_with('checkpoint_test')}-only")
    if not cfg.checkpoint.enforce:
        return StageRecord.result("SKIPPED", "checkpoint.enforce is false")
    c = cfg.checkpoint
    directory = ckpt.checkpoint_dir(session.node_log_dir, fill_run_id(c.checkpoint_dir, session.run.run_id),
                                   session.plan.distributed)
    if isinstance(directory, Exception):
        return StageRecord.result("FAIL", str(directory))
    mbs, gbs, precision, _ = smoke_cell(session)
    first = session.plan.combos[0]
    save_job = job_spec(session, label="ckpt_save", combo=first, mbs=mbs, gbs=gbs, precision=precision,
                        iterations=c.save_iters, save_dir=directory, save_interval=c.save_interval)
    root = _checkpoint_root(session, save_job, directory)
    if isinstance(root, StageRecord):
        return root
    setup = session.runtime().exec(f"{ckpt.cleanup_command(root, distributed=True) or 'true'} && "
                                   f"{ckpt.mkdir_command(directory)}", timeout=60)
    bad = [r for r in setup if not r.ok]
    if bad:
        detail = session.redactor(bad[0].error or bad[0].stderr or bad[0].stdout or "").strip()[-300:]
        return StageRecord.result("ERROR", f"cannot prepare the checkpoint directory {directory} on node "
                                           f"{bad[0].host}: {detail}")
    saved = run_job(session, save_job, stage=CHECKPOINT.id, combo="ckpt_save")
    resume_job = job_spec(session, label="ckpt_resume", combo=first, mbs=mbs, gbs=gbs, precision=precision,
                          iterations=c.resume_iters, save_dir=directory, load_dir=ckpt.resume_load_dir(root))
    if saved.failed:
        record = _job_record(session, saved)
        record.reason = f"save phase: {record.reason}"
        return record
    last_ckpt = ckpt.last_checkpoint_step(c.save_iters, c.save_interval)
    check = ckpt.latest_checkpoint_check_command(root)
    session.hosts().answer(check, f"{last_ckpt}\n")  # what the save phase leaves, where no node is asked
    listing = session.runtime().exec(check, timeout=60)
    if not listing[0].ok or not listing[0].stdout.strip():
        return StageRecord.result("FAIL", f"no checkpoint written: {root}/checkpoints/latest_checkpointed_iteration"
                                          ".txt is missing on node 0 (is the checkpoint directory volume-mounted "
                                          "into the container?)")
    resumed = run_job(session, resume_job, stage=CHECKPOINT.id, combo="ckpt_resume")
    if resumed.failed:
        record = _job_record(session, resumed)
        record.reason = f"resume phase: {record.reason}"
        return record
    if not (saved.started and resumed.started):  # both phases shown, neither started (a dry run)
        return _job_record(session, resumed)
    save_losses = {s: it.loss for s, it in saved.reporting_parser().iterations.items()}
    resume_losses = {s: it.loss for s, it in resumed.reporting_parser().iterations.items()}
    verdict = checkpoint_continuity(save_losses, resume_losses, last_ckpt, c.loss_rtol)
    record = StageRecord.result("PASS" if verdict.ok else "FAIL", verdict.reason)
    record.data.update({k: v for k, v in dataclasses.asdict(verdict).items() if k not in ("ok", "reason")})
    record.data["loss_rtol"] = c.loss_rtol
    record.data.update(_io_times(saved, resumed))
    apply_health(record, saved.health, phase="save")
    apply_health(record, resumed.health, phase="resume")
    for phase, res in (("save", saved), ("resume", resumed)):
        for path in res.local_logs[:1]:
            if path.exists():
                record.artifacts[f"{phase} node 0 log"] = session.run.relative(path)
    if verdict.ok:
        distributed = session.plan.distributed
        session.runtime().exec(ckpt.cleanup_command(root if distributed else directory, distributed=distributed)
                               or "true", timeout=120)
    return record


def _checkpoint_root(session: Session, save_job, directory: str) -> str | StageRecord:
    """Where Primus will save under ``directory``: the experiment YAML may pin a sub-folder
    (the 405B one pins ``exp_name``), and the resume must load from there."""
    try:
        _, header = primus_experiment(session, save_job)
    except JobSetupError as exc:
        return StageRecord.result("FAIL", f"save phase: {exc}")
    if not header:  # a YAML that names none of them (or no node was asked): the workspace itself
        session.hosts().assume(f"{directory.rstrip('/')}/{primus.CHECKPOINTS_SUBDIR}", (
            f"the checkpoints folder is <{'>/<'.join(primus.EXPERIMENT_KEYS)}>/checkpoints as the chosen YAML's "
            f"header resolves it, with workspace {directory} (a YAML that pins exp_name, as the 405B one, "
            "adds that folder)"))
        return directory
    root = primus.checkpoint_root(directory, header, dict(save_job.env))
    if isinstance(root, JobSetupError):
        return StageRecord.result("FAIL", f"save phase: {root}")
    return root


def _io_times(saved: JobResult, resumed: JobResult) -> dict:
    """Checkpoint save and load durations from node 0's logs (informational)."""
    out: dict = {}
    for key, res in (("save", saved), ("load", resumed)):
        if not res.local_logs or not res.local_logs[0].exists():
            continue
        with open(res.local_logs[0], encoding="utf-8", errors="replace") as fh:
            times = m.checkpoint_io_times(fh)
        if key == "save":
            out["save_times_s"] = {str(k): v for k, v in times.save_times_s.items()}
        else:
            out["load_time_s"] = times.load_time_s
        if times.notes:
            out.setdefault("io_notes", []).extend(times.notes)
    return out
