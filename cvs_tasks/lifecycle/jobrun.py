"""Start one training job on every node, watch it to the end, stop it and free the GPUs.

Used by smoke, both checkpoint phases and every training combo, so the sequence is written
once: find the backend's experiment file (the Primus YAML), set up the Broadcom NIC library
where the backend needs it (distributed Megatron-LM), write the per-node wrapper scripts (0700),
snapshot each node's health, launch them detached, watch, stop what is still running, kill
leftover GPU processes, snapshot health again and judge it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cvs_tasks import backends, runtimes
from cvs_tasks.errors import InfraError
from cvs_tasks.jobs import cleanup, nic, primus
from cvs_tasks.jobs.shell import q
from cvs_tasks.jobs.spec import JobSetupError, JobSpec, LaunchPlan, build_launch, render_dry_run
from cvs_tasks.lifecycle import health
from cvs_tasks.lifecycle.runner import Interrupted
from cvs_tasks.lifecycle.session import Session
from cvs_tasks.lifecycle.watch import Watcher, WatchOutcome, WatchTarget
from cvs_tasks.metrics import LogParser
from cvs_tasks.remote.health import take_snapshots
from cvs_tasks.verify import ConfigCheck, asked_from_job, check_effective, effective_from_arguments


@dataclass
class JobResult:
    job: JobSpec
    launch: LaunchPlan | None = None
    outcome: WatchOutcome | None = None
    setup_failure: str | None = None
    local_logs: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    health: list = field(default_factory=list)  # HealthCheck rows of the snapshots around the job

    @property
    def ok(self) -> bool:
        return self.setup_failure is None and self.outcome is not None and self.outcome.ok

    @property
    def started(self) -> bool:
        """The job ran and was watched (a dry run only shows it)."""
        return self.outcome is not None

    @property
    def failed(self) -> bool:
        """It could not be built or set up, or it ran and failed (shown, not started, is neither)."""
        return self.setup_failure is not None or (self.outcome is not None and not self.outcome.ok)

    @property
    def reason(self) -> str:
        if self.setup_failure:
            return self.setup_failure
        return self.outcome.reason if self.outcome else "not run"

    def reporting_parser(self) -> LogParser | None:
        if self.outcome is None:
            return None
        return self.outcome.reporting.parser


def run_job(session: Session, job: JobSpec, *, stage: str, combo: str | None) -> JobResult:
    result = JobResult(job=job)
    session.runtime()  # connect first: a scheduler that assigns nodes binds the plan to those the launch uses
    try:
        experiment = backends.get(job.backend).experiment(session, job)
        launch = build_launch(job, experiment=experiment)
    except JobSetupError as exc:
        result.setup_failure = str(exc)
        return result
    result.launch = launch
    if session.dry_run:  # shown, not started: the wrapper scripts and launch lines as a run writes them
        _show(session, job, launch)
        return result
    for warning in launch.warnings:
        session.say(f"warning: {warning}", "warning")
    nic_failure = _nic_setup(session, job)
    if nic_failure:
        result.setup_failure = nic_failure
        return result
    for node in launch.nodes:  # the copies' folders, inside the run directory, before anything starts
        session.run.prepare_file(session.run.node_log_path(stage, combo or job.label, node.rank))
    _prepare(session, launch.prepare)
    _write_scripts(session, launch)
    before = health.before_job(session)
    # the run's scheduler starts every node's job (static nodes: detached on each; Slurm: one srun step)
    step = session.scheduler.launch(session, launch, session.run.node_log_path(stage, combo, 0).parent.parent)
    targets = []
    for node, host in zip(launch.nodes, session.plan.hosts):
        local = session.run.node_log_path(stage, combo or job.label, node.rank)
        result.local_logs.append(local)
        targets.append(WatchTarget(node.rank, host.address, node.log_path, node.exit_path, local))
    params = job.train_params
    world = job.nnodes * session.config.gpus_per_node

    def parser() -> LogParser:
        return LogParser(
            dialect="auto",
            seq_length=_int(params.get("sequence_length")),
            world_size=world,
            global_batch_size=_int(job.gbs),
            model=params.get("model_name"),
        )

    watcher = Watcher(
        session.hosts(),
        targets,
        iterations=job.iterations,
        settings=session.watch_settings(),
        parser_factory=parser,
        listener=session.listener,
        stage=stage,
        combo=combo,
        stop=session.stop,
        redactor=session.redactor,
        config_check=config_checker(job, session.config.gpus_per_node),
    )
    try:
        result.outcome = watcher.run()
        result.notes += result.outcome.notes
    finally:
        if result.outcome is None or not result.outcome.ok or any(n.exit_code is None for n in result.outcome.nodes):
            _stop(session, launch)
        if step is not None:
            step.finish(result.outcome)
        _free_gpus(session, result)
    if result.outcome.status == "interrupted":  # the stop flag was seen before the signal's exception
        raise Interrupted("stop requested")
    result.health = health.after_job(session, before)
    if not result.outcome.ok and not (step is not None and step.cause):
        _name_lost_nodes(session, result.outcome)
    return result


def config_checker(job: JobSpec, gpus_per_node: int):
    """The watcher's check of a node's arguments dump against what this job asked for."""
    asked = asked_from_job(job, gpus_per_node)

    def check(parser: LogParser) -> ConfigCheck:
        return check_effective(asked, effective_from_arguments(parser.arguments, gpus_per_node))

    return check


def _show(session: Session, job: JobSpec, launch: LaunchPlan) -> None:
    """Print, in order, every command a real job runs: NIC set-up, folders, scripts, launch, then
    the stop and the GPU clean-up that follow every job (the DryRunHosts echo what is exec'd)."""
    if nic.needs_broadcom_setup(job):
        session.say("# every node: Broadcom NIC library set-up and HCA check (in the container)")
        session.runtime().exec(nic.nic_setup_command(job), timeout=120)
    session.say("# every node, just before the job starts (and again after it ends, with that node's "
                "kernel-log mark): the health snapshot on the node's own shell")
    take_snapshots(session.hosts())
    for line in render_dry_run(launch):
        session.say(session.hosts().mark(line))
    for line in session.scheduler.dry_run_launch_lines(session, launch):
        session.say(line)
    session.say("# after the job, every node: stop what still runs (only when the job did not end by itself)")
    session.runtime().exec([cleanup.stop_job_command(n) for n in launch.nodes], timeout=60)
    if not runtimes.get(session.config.container.runtime.name).host_pids:
        session.say("# then list the GPU processes left in the container and kill them (kill -9 <pids>, bounded wait)")
        session.runtime().exec(cleanup.gpu_pids_command(session.config.gpu.pids_command), timeout=60)


def _name_lost_nodes(session: Session, outcome: WatchOutcome) -> None:
    """A peer's NCCL error is only the echo of a node whose container died: name that node."""
    try:
        up = session.runtime().running()
    except Exception:  # noqa: BLE001 - the stage's own result stands
        return
    lost = [h.address for h, running in zip(session.plan.hosts, up) if not running]
    if lost:
        outcome.status = "unreachable"
        outcome.reason = f"container not running on node {', '.join(lost)} (lost mid-run); then: {outcome.reason}"


def _int(value) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def primus_experiment(session: Session, job: JobSpec) -> tuple[str, dict[str, str]]:
    """The experiment YAML this image has for the job (newest layout first) and its header
    (workspace, work_group, user_name, exp_name): one round trip to node 0, asked once per run.
    Where no node is asked (a dry run) the first candidate is taken, with an empty header, and
    every line naming it says so."""
    candidates = primus.primus_yaml_candidates(job)
    command = primus.yaml_check_command(candidates, job.param("primus_root"))
    if command in session.primus_yamls:
        return session.primus_yamls[command]
    hosts, root = session.hosts(), job.param("primus_root").rstrip("/")
    hosts.answer(command, f"EXISTS {candidates[0]}\n")  # as yaml_check_command answers when the first exists
    hosts.assume(f"--config {q(candidates[0])}", (
        f"--config is the first of {', '.join(candidates)} that exists in {root} (the check above); "
        "a YAML without the precision in its name (Primus up to v0.5) takes --fp8 hybrid for FP8"))
    results = session.runtime().exec(command, timeout=60)
    first = results[0]
    if not first.ok and first.error:
        raise InfraError(f"cannot look for the Primus YAML on node {first.host}: {first.error}")
    found = primus.pick_existing_yaml(first.stdout)
    if found is None:
        raise JobSetupError(primus.missing_yaml_message(candidates, job.param("primus_root")))
    session.primus_yamls[command] = found, primus.experiment_header(first.stdout)
    return session.primus_yamls[command]


def _nic_setup(session: Session, job: JobSpec) -> str | None:
    """Broadcom/thor2 library copy + HCA check (``nic.needs_broadcom_setup``); returns a failure."""
    if not nic.needs_broadcom_setup(job):
        return None
    results = session.runtime().exec(nic.nic_setup_command(job), timeout=120)
    pattern = job.param("hca_id_pattern")
    for r in results:
        if not r.ok and r.error:
            return f"NIC setup failed on node {r.host}: {r.error}"
        problem = nic.check_hca(r.stdout, pattern)
        if problem:
            return f"node {r.host}: {problem}"
    return None


def _write_scripts(session: Session, launch: LaunchPlan) -> None:
    """Each node's own script on that node, all in one fan-out (launch.nodes is in the hosts' order)."""
    files = [(node.script_text.encode("utf-8"), node.script_path) for node in launch.nodes]
    res = session.hosts().put_each(files, 0o700, timeout=60)
    bad = [(r, path) for r, (_, path) in zip(res, files) if not r.ok]
    if bad:
        r, path = bad[0]
        raise InfraError(f"cannot write {path} on node {r.host}: {r.error or r.stderr.strip()}")


def _prepare(session: Session, commands: list[str]) -> None:
    """Create the script and log folders on the node (bind-mounted into the container)."""
    if not commands:
        return
    from cvs_tasks.lifecycle.node_folders import hold_lock

    hold_lock(session, " && ".join(commands), "the script and log folders")  # and this run holds the log folder


def _stop(session: Session, launch: LaunchPlan) -> None:
    """Stop the job everywhere (so surviving nodes never hang on a dead peer); best effort."""
    try:
        session.runtime().exec([cleanup.stop_job_command(n) for n in launch.nodes], timeout=60)
    except Exception as exc:  # noqa: BLE001 - clean-up must not mask the stage's own result
        session.say(f"warning: stopping the job failed: {exc}", "warning")


def _free_gpus(session: Session, result: JobResult) -> None:
    """Kill GPU processes left behind so the next combo does not start on top of them.

    Only inside our own docker container: where the job's processes are in the node's process
    table (``host_pids``: the host runtime, and pyxis, whose containers share it) every GPU process
    of the node is listed, other users' included, so there the job's own process group (stopped
    above) is all that is ours to kill."""
    if runtimes.get(session.config.container.runtime.name).host_pids:
        return
    try:
        command = cleanup.gpu_pids_command(session.config.gpu.pids_command)
        listed = session.runtime().exec(command, timeout=60)
        kills = [cleanup.kill_pids_command(cleanup.parse_showpids(r.stdout)) if r.ok else "true" for r in listed]
        if any(k != "true" for k in kills):
            session.runtime().exec(kills, timeout=60)
            result.notes.append("killed leftover GPU processes")
    except Exception as exc:  # noqa: BLE001
        session.say(f"warning: GPU process clean-up failed: {exc}", "warning")
