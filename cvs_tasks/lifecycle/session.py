"""A Session is one run directory plus everything a stage needs to act on the cluster.

It resolves which run an ad hoc command belongs to (``resolve_run``: the named one, the latest one
while it is open, or a new one; README "Chaining rules"), says so on the command's first console
line, refuses a config that changed since the run started (manifest hash), and opens the SSH
fan-out and the container runtime lazily, once per process.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from cvs_tasks import __version__, schedulers
from cvs_tasks.config import Cluster, Suite, effective_config, load_cluster, load_suite
from cvs_tasks.errors import BadInput
from cvs_tasks.inputs import InputRefused, open_regular, read_secret
from cvs_tasks.lifecycle.node_folders import owner_name
from cvs_tasks.lifecycle.static_nodes import NodeSource, node_source
from cvs_tasks.lifecycle.watch import WatchSettings
from cvs_tasks.plan import RunPlan, check_plan_ready, make_plan, ready_or_refused
from cvs_tasks.run import RunDir
from cvs_tasks.run.events import Message, ignore
from cvs_tasks.run.redact import Redactor
from cvs_tasks.run.rundir import LATEST, DryRunDir, RunRequest, check_run_flag
from cvs_tasks.run.state import first_mention, run_line, run_state

SHIPPED_CLUSTER = Path("cluster") / "cluster.json"  # the repo's cluster file, edited in place


@dataclass
class Session:
    plan: RunPlan
    run: RunDir
    dry_run: bool = False  # its run directory is a DryRunDir and its nodes DryRunNodes (open_session)
    force: bool = False
    listener: Callable[[object], None] = ignore
    redactor: Redactor = field(default_factory=Redactor)
    stop: threading.Event = field(default_factory=threading.Event)
    scratch: Path | None = None  # a dry run's throw-away run folder, removed on close / exit
    printed: set = field(default_factory=set)  # (stage, combos) a dry run already printed
    told: set = field(default_factory=set)  # one-time console notes already shown (`--with-pre`'s plan)
    primus_yamls: dict = field(default_factory=dict)  # YAML check command -> (yaml, header), once per run
    scheduler: schedulers.Scheduler = None  # type: ignore[assignment]  # the cluster's (schedulers.for_cluster)
    nodes: NodeSource | None = None  # where the hosts come from: the scheduler, or a dry run's
    how: str = "new run"  # how the command came to its run (``resolve_run``), for its first line
    _hosts: object | None = None
    _runtime: object | None = None

    # -- cluster access (lazy) ----------------------------------------------------------------
    def __post_init__(self) -> None:
        if self.scheduler is None:
            self.scheduler = schedulers.for_cluster(self.plan.cluster)
        if self.nodes is None:
            self.nodes = self.scheduler

    def hosts(self):
        if self._hosts is None:
            self._hosts = self.nodes.acquire(self)
        return self._hosts

    def reachable_hosts(self):
        """The hosts for teardown, asked of the scheduler afresh (an allocation re-acquired briefly if it
        ended); None when the run never held any (there is nothing on any node to remove)."""
        hosts = self.nodes.hosts_for_teardown(self)
        if hosts is not self._hosts:  # a new allocation: the runtime is bound to the old hosts
            self._hosts, self._runtime = hosts, None
        return hosts

    def release_nodes(self) -> str | None:
        """Let the run's nodes go (an allocation the harness requested); what was done, if anything."""
        return self.nodes.release(self)

    def runtime(self):
        if self._runtime is None:
            from cvs_tasks.remote import container_spec, runtime_for
            from cvs_tasks.remote.docker_cmd import with_env

            hosts = self.hosts()  # first: a scheduler that assigns nodes binds the plan to them
            spec = container_spec(self.plan.suite.config.container)
            if self.scheduler.assigns_nodes:  # the allocation decided MASTER_ADDR, not the config
                spec = with_env(spec, {"MASTER_ADDR": self.plan.env["MASTER_ADDR"]})
            self._runtime = runtime_for(hosts, spec, run_id=self.run.run_id, owner=owner_name(),
                                        nnodes=self.plan.nnodes)
        return self._runtime

    def close(self) -> None:
        if self._hosts is not None:
            self._hosts.close()
            self._hosts = None
            self._runtime = None
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)

    # -- settings -----------------------------------------------------------------------------
    @property
    def config(self):
        return self.plan.suite.config

    def watch_settings(self) -> WatchSettings:
        w = self.config.watch
        return WatchSettings(
            poll_interval_s=w.poll_interval_s,
            stall_timeout_s=w.stall_timeout_s,
            startup_timeout_s=w.startup_timeout_s,
            timeout_s=w.timeout_s,
        )

    @property
    def history_path(self) -> Path:
        """The history database of this run's reports folder (config ``history.path`` if set)."""
        from cvs_tasks.history import history_path

        return history_path(self.run.path.parent, self.config.history.path or None)

    @property
    def node_run_dir(self) -> str:
        """Per-run folder on the nodes (scripts, the token file); removed at teardown."""
        return f"{self.config.paths.scripts_dir.rstrip('/')}/{self.run.run_id}"

    @property
    def node_log_dir(self) -> str:
        """``paths.log_dir`` with ``{run-id}`` filled: where this run's training logs go on the nodes."""
        from cvs_tasks.config.placeholders import fill_run_id

        return fill_run_id(self.config.paths.log_dir, self.run.run_id)

    def say(self, text: str, level: str = "info") -> None:
        self.listener(Message(self.redactor(text), level))


def open_session(req: RunRequest, *, listener: Callable[[object], None] = ignore) -> Session:
    """Resolve the run directory for ``req`` and load its config; refuse a changed config.

    The first line the listener gets names the run, how the command came to it, its config and
    cluster (``run_line``), once per run per process; what is learnt before it (the default
    cluster, readiness warnings) follows it."""
    notes: list[Message] = []
    try:
        session = _open(req, notes.append)
    except BaseException:
        for note in notes:
            listener(note)
        raise
    session.listener = listener
    if first_mention(session.run):
        run_id = None if session.scratch is not None else session.run.run_id  # a dry run's new run has none
        listener(Message(run_line(run_id, session.how, session.plan.suite.config_path, session.plan.cluster.path,
                                  dry_run=not session.run.durable)))
    for note in notes:
        listener(note)
    return session


def _open(req: RunRequest, listener: Callable[[object], None]) -> Session:
    root = req.reports_root  # req.run was checked when the request was built
    for flag, path, what in (("--config", req.config, "config"), ("--cluster", req.cluster, "cluster")):
        if path:
            _readable(path, what, flag)  # a missing file is named first, before any run is looked for
    existing, how = resolve_run(req, root)
    if existing is not None:
        check_run_flag(existing.run_id)
        manifest = existing.manifest()
        config = req.config or manifest.get("config_file")
        cluster = req.cluster or manifest.get("cluster_file")
        suite_flag = req.suite or manifest.get("suite_flag")
        recorded = f"run {existing.run_id}'s manifest"
    else:
        config, cluster, suite_flag = req.config, req.cluster, req.suite
        recorded = ""
    if not config:
        raise BadInput("no config: pass --config <file> or set cvs.config in invoke.yaml / INVOKE_CVS_CONFIG "
                       "(see `invoke config.list`)")
    if not req.config:
        _readable(config, "config", recorded)  # the run's: named before the cluster is read
    if not cluster and SHIPPED_CLUSTER.is_file():
        cluster = str(SHIPPED_CLUSTER)
        listener(Message(f"cluster: {SHIPPED_CLUSTER} (the default; --cluster, cvs.cluster in invoke.yaml or "
                         "INVOKE_CVS_CLUSTER choose another)"))
    if not cluster:
        raise BadInput(f"no cluster file: pass --cluster <file>, set cvs.cluster in invoke.yaml / INVOKE_CVS_CLUSTER, "
                       f"or write {SHIPPED_CLUSTER} (e.g. from cluster/localhost.json)")
    if not req.cluster:
        _readable(cluster, "cluster", recorded or "the default cluster file")
    cluster_obj: Cluster = load_cluster(Path(cluster))
    suite: Suite = load_suite(Path(config), cluster_obj)
    _refuse_placeholders(suite)
    plan = make_plan(suite, cluster_obj, explicit_suite=suite_flag)
    if existing is not None:
        if req.check_config:
            _check_unchanged(existing, suite, cluster_obj)
        run = DryRunDir(existing.path) if req.dry_run else existing  # a dry run reads it, writes nothing
    else:
        run = None
    redactor = read_secrets(plan)  # before anything is written: the manifest is redacted too
    hosts = None
    if run is None:  # a new run: refuse what would only fail once the jobs start
        if req.dry_run:  # a dry run asks no node
            check_plan_ready(plan)
        else:  # the image's launcher and the nodes' RDMA links too (the connection is kept for the run)
            hosts, warnings = ready_or_refused(plan)
            for warning in warnings:
                listener(Message(redactor(f"warning: {warning}"), "warning"))
        try:
            run = _create_run(req, root, plan, suite_flag, redactor)
        except BaseException:
            if hosts is not None:
                hosts.close()
            raise
    run.redact = redactor  # every file the run directory writes from now on is masked of them
    scheduler = schedulers.for_cluster(plan.cluster)
    session = Session(plan=plan, run=run, dry_run=req.dry_run, force=req.force, listener=listener, redactor=redactor,
                      scheduler=scheduler, nodes=node_source(scheduler, dry_run=req.dry_run), _hosts=hosts, how=how)
    if req.dry_run and existing is None:
        session.scratch = run.path.parent  # removed at exit (stage tasks never call close())
    return session


def _readable(path: str, what: str, given_by: str) -> None:
    """Name a missing or unreadable config or cluster file first, and where its path came from
    (a flag, a run's manifest), before any file it would have led to is read."""
    try:
        os.close(open_regular(path, what))
    except InputRefused as exc:
        raise BadInput(f"{given_by + ' ' if given_by else ''}{path}: {exc.message}") from None


def _refuse_placeholders(suite: Suite) -> None:
    """While enforcing, a zero bound would be a silent PASS (min) or a certain FAIL (max): refuse it."""
    if not suite.config.enforce_thresholds:
        return
    from cvs_tasks.history.calibrate import placeholder_problems

    problems = placeholder_problems(suite.thresholds, suite.threshold_path)
    if problems:
        raise BadInput("placeholder thresholds while enforce_thresholds is true:\n  " + "\n  ".join(problems)
                       + "\nDerive measured bounds with `invoke thresholds.calibrate --config ... --cluster ...` "
                       "(from passing runs in the history), or set enforce_thresholds false to record only.")


NEW_RUN = "new run"


def resolve_run(req: RunRequest, root: Path) -> tuple[RunDir | None, str]:
    """The run a command works on (None: a new one) and how it came to it, for its first line.

    ``--run`` names the run (``latest`` the newest); a named run that does not exist yet is
    created with that id. Without it, ``invoke all`` (``req.new``) starts a new run, and a stage
    command joins the latest run of its config (the latest of any when no config is named) while
    that run is open (``run_state``). A finished or torn-down run is joined only by a command that
    does not launch (``req.launches``: judging its records, tearing down); one that launches
    starts a new run when a config is named and otherwise is refused with the two ways on. A
    command that only judges (``req.judges``) never starts a run. A dry run is resolved as the run
    it shows."""
    if req.run:
        for cand in (Path(req.run).expanduser(), root / req.run):
            if (cand / "run.json").is_file():
                run = RunDir(cand.resolve())
                state = run_state(run)
                return run, ("adds to the open run" if state.open else "adds to the run") + f" ({state.detail})"
        if req.run == LATEST:
            raise BadInput(f"--run latest: there is no run in {root} yet; start one without --run")
        if req.judges:
            raise BadInput(f"--run {req.run}: no such run in {root}: there is nothing to judge")
        return None, NEW_RUN
    if req.new:
        return None, NEW_RUN
    latest = root / LATEST
    run = RunDir(latest.resolve()) if (latest / "run.json").is_file() else None
    config = run.manifest().get("config_file", "") if run is not None else ""
    if run is None or (req.config and Path(config).resolve() != Path(req.config).resolve()):
        return _new_run(req, root, run)  # a different config is a different run
    state = run_state(run)
    if state.open:
        return run, f"joins the open run ({state.detail})"
    if not req.launches:
        return run, f"joins the run that is over ({state.detail}); this command launches nothing"
    if req.config:
        return None, f"{NEW_RUN} (the latest run of this config, {run.run_id}, is over: {state.detail})"
    raise BadInput(
        f"the latest run {run.run_id} is over ({state.detail}; config {config}), and this command would "
        "launch containers or train. Two ways on:\n"
        f"  --run {run.run_id}   adds to that run (its recorded stages are kept; the container is launched again)\n"
        "  --config <file>   starts a new run\n"
        "Judging what it recorded (metric, loss, report) needs neither.")


def _new_run(req: RunRequest, root: Path, latest: RunDir | None) -> tuple[None, str]:
    """A new run; refused for a command that only judges (a new run has nothing recorded)."""
    if not req.judges:
        return None, NEW_RUN
    if latest is None:
        raise BadInput(f"there is no run in {root} to judge: start one (`invoke all`, or a stage command such as "
                       "`invoke train`), or pass --run <id>")
    raise BadInput(f"no run of config {req.config} to judge: the latest run {latest.run_id} is of "
                   f"{latest.manifest().get('config_file')}; pass --run <id>, or leave out --config to judge it")


def _check_unchanged(run: RunDir, suite: Suite, cluster: Cluster) -> None:
    manifest = run.manifest()
    if manifest.get("files_hash") and manifest["files_hash"] != suite.files_hash:
        raise BadInput(
            f"the config or threshold file changed since run {run.run_id} started "
            f"({suite.config_path}); results of one run must come from one config. "
            "Start a new run (`invoke all` without --run) or restore the file."
        )
    hosts = [h.address for h in cluster.hosts]
    fixed = not schedulers.for_cluster(cluster).assigns_nodes  # the listed nodes, not those handed out
    if fixed and manifest.get("hosts") and manifest["hosts"] != hosts:
        raise BadInput(
            f"the cluster changed since run {run.run_id} started (was {manifest['hosts']}, now {hosts}); "
            "start a new run"
        )


def _create_run(req: RunRequest, root: Path, plan: RunPlan, suite_flag: str | None,
                redactor: Redactor) -> RunDir:
    run_id = Path(req.run).name if req.run else None
    if req.dry_run:  # a dry run records in memory: an empty scratch folder, `latest` untouched
        run = DryRunDir(_dry_run_root() / (run_id or "dry-run"))
    else:
        run = RunDir.create(root, run_id)
    suite = plan.suite
    manifest = {
        "run_id": run.run_id,
        "tool_version": __version__,
        "created": time.time(),
        "config_file": str(suite.config_path.resolve()),
        "cluster_file": str(plan.cluster.path.resolve()),
        "threshold_file": str(suite.threshold_path.resolve()) if suite.threshold_path else None,
        "files_hash": suite.files_hash,
        "suite_flag": suite_flag,
        "warnings": list(suite.warnings),
        **plan.manifest_fields(),
        "effective_config": effective_config(suite),
    }
    run.redact = redactor
    run.write_manifest(manifest)
    return run


_DRY_RUN_ROOT: list[Path] = []


def _dry_run_root() -> Path:
    """One scratch folder per process, so chained dry-run tasks (`invoke container --dry-run smoke
    --dry-run`) share one scratch run; removed when the process exits."""
    if not _DRY_RUN_ROOT or not _DRY_RUN_ROOT[0].is_dir():
        _DRY_RUN_ROOT[:] = [Path(tempfile.mkdtemp(prefix="cvs-dry-run-"))]
        atexit.register(shutil.rmtree, _DRY_RUN_ROOT[0], True)
    return _DRY_RUN_ROOT[0]


def read_secrets(plan: RunPlan) -> Redactor:
    """A Redactor holding every secret the run will use, so every output can be redacted of them.

    Every non-comment line of a token or password file is a secret. A missing file is the job's
    to report (it runs without HF_TOKEN); a file that is there but not readable text (a FIFO, a
    device, non-UTF-8, over the size limit) is bad input, refused before anything runs. So is a
    container.env value holding a secret: it would be written into node scripts and `docker inspect`."""
    config = plan.suite.config
    redactor = Redactor()
    files = [("paths.hf_token_file", config.paths.hf_token_file)]
    registry = config.container.runtime.args.registry
    if registry is not None and registry.password_file:
        files.append(("container.runtime.args.registry.password_file", registry.password_file))
    for field_name, name in files:
        path = Path(name).expanduser()
        if not os.path.lexists(path):
            continue
        try:
            lines = read_secret(path)
        except InputRefused as exc:
            raise BadInput(f"{field_name}: {exc}") from None
        for line in lines:
            redactor.add(line)
    for key, value in config.container.env.items():
        if redactor(value) != value:
            raise BadInput(f"{plan.suite.config_path}: container.env.{key}: holds the text of a secret file "
                           "(token or registry password); env values are written into node scripts and "
                           "`docker inspect`: remove it (the HF token reaches the job from paths.hf_token_file)")
    return redactor
