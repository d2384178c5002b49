"""A Session is one run directory plus everything a stage needs to act on the cluster.

It resolves which run an ad hoc command belongs to (the named one, the latest one for the same
config, or a new one), refuses a config that changed since the run started (manifest hash), and
opens the SSH fan-out and the container runtime lazily, once per process.
"""

from __future__ import annotations

import atexit
import getpass
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from cvs_tasks import __version__
from cvs_tasks.config import Cluster, Suite, effective_config, load_cluster, load_suite
from cvs_tasks.errors import BadInput
from cvs_tasks.inputs import InputRefused, read_secret
from cvs_tasks.jobs.watch import WatchSettings
from cvs_tasks.lifecycle.nodes import NodeSource, StaticNodes, node_source
from cvs_tasks.plan import RunPlan, check_plan_ready, make_plan, ready_or_refused
from cvs_tasks.run import RunDir
from cvs_tasks.run.events import Message, ignore
from cvs_tasks.run.redact import Redactor
from cvs_tasks.run.rundir import DryRunDir, RunRequest, check_run_flag

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
    primus_yamls: dict = field(default_factory=dict)  # YAML check command -> (yaml, header), once per run
    nodes: NodeSource = field(default_factory=StaticNodes)  # where the hosts come from
    _hosts: object | None = None
    _runtime: object | None = None

    # -- cluster access (lazy) ----------------------------------------------------------------
    def hosts(self):
        if self._hosts is None:
            self._hosts = self.nodes.hosts(self)
        return self._hosts

    def reachable_hosts(self):
        """The hosts for teardown: on Slurm the run's own allocation, re-acquired briefly if it ended.

        None when the run never held a Slurm allocation (there is nothing on any node to remove)."""
        hosts = self.nodes.hosts_for_teardown(self)
        if hosts is not self._hosts:  # a new allocation: the runtime is bound to the old hosts
            self._hosts, self._runtime = hosts, None
        return hosts

    def release_nodes(self) -> str | None:
        """Let the run's nodes go (a Slurm allocation the harness requested); what was done, if anything."""
        return self.nodes.release(self)

    def runtime(self):
        if self._runtime is None:
            from cvs_tasks.remote import container_spec, runtime_for
            from cvs_tasks.remote.docker_cmd import with_env

            hosts = self.hosts()  # first: on Slurm this binds the plan to the allocated nodes
            spec = container_spec(self.plan.suite.config.container)
            if self.scheduled:  # the allocation decided MASTER_ADDR, not the config
                spec = with_env(spec, {"MASTER_ADDR": self.plan.env["MASTER_ADDR"]})
            self._runtime = runtime_for(hosts, spec, run_id=self.run.run_id, owner=_owner(),
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
    def scheduled(self) -> bool:
        """The nodes come from a scheduler allocation (Slurm) rather than a static list."""
        return self.plan.cluster.scheduler is not None

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


def _owner() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def open_session(req: RunRequest, *, listener: Callable[[object], None] = ignore) -> Session:
    """Resolve the run directory for ``req`` and load its config; refuse a changed config."""
    root = req.reports_root  # req.run was checked when the request was built
    existing = _existing_run(req, root)
    if existing is not None:
        check_run_flag(existing.run_id)
    if existing is not None:
        manifest = existing.manifest()
        config = req.config or manifest.get("config_file")
        cluster = req.cluster or manifest.get("cluster_file")
        suite_flag = req.suite or manifest.get("suite_flag")
    else:
        config, cluster, suite_flag = req.config, req.cluster, req.suite
    if not config:
        raise BadInput("no config: pass --config <file> or set cvs.config in invoke.yaml / INVOKE_CVS_CONFIG "
                       "(see `invoke config.list`)")
    if not cluster and SHIPPED_CLUSTER.is_file():
        cluster = str(SHIPPED_CLUSTER)
        listener(Message(f"cluster: {SHIPPED_CLUSTER} (the default; --cluster, cvs.cluster in invoke.yaml or "
                         "INVOKE_CVS_CLUSTER choose another)"))
    if not cluster:
        raise BadInput(f"no cluster file: pass --cluster <file>, set cvs.cluster in invoke.yaml / INVOKE_CVS_CLUSTER, "
                       f"or write {SHIPPED_CLUSTER} (e.g. from cluster/localhost.json)")
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
    session = Session(plan=plan, run=run, dry_run=req.dry_run, force=req.force, listener=listener,
                      redactor=redactor, nodes=node_source(plan, dry_run=req.dry_run), _hosts=hosts)
    if req.dry_run and existing is None:
        session.scratch = run.path.parent  # removed at exit (stage tasks never call close())
    return session


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


def _existing_run(req: RunRequest, root: Path) -> RunDir | None:
    if req.run:
        for cand in (Path(req.run).expanduser(), root / req.run):
            if (cand / "run.json").is_file():
                return RunDir(cand.resolve())
        return None
    if req.new:
        return None
    latest = root / "latest"
    if not (latest / "run.json").is_file():
        return None
    run = RunDir(latest.resolve())
    if req.config and Path(run.manifest().get("config_file", "")).resolve() != Path(req.config).resolve():
        return None  # a different config is a different run
    return run


def _check_unchanged(run: RunDir, suite: Suite, cluster: Cluster) -> None:
    manifest = run.manifest()
    if manifest.get("files_hash") and manifest["files_hash"] != suite.files_hash:
        raise BadInput(
            f"the config or threshold file changed since run {run.run_id} started "
            f"({suite.config_path}); results of one run must come from one config. "
            "Start a new run (`invoke all` without --run) or restore the file."
        )
    hosts = [h.address for h in cluster.hosts]
    if cluster.scheduler is None and manifest.get("hosts") and manifest["hosts"] != hosts:
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
