"""Config + cluster -> RunPlan: which suite, which backend, which hosts, which combos.

The suite (single or distributed) is explicit (``--suite``), else read from the config file name
(``*_single.json`` / ``*_distributed.json``), else from the host count. A mismatch between the
suite and the cluster is bad input: the reference launches N independent jobs with ``NNODES=N``
when a single-node config meets a multi-host cluster; we refuse instead.

Making the plan is pure. Before a run the plan is also checked against what only the machine can
tell: the token file (``config.readiness``) and, when the suite needs it, the image's launcher
and the nodes' RDMA links (``check_launcher``, through ``remote``); this module sits above the
config, jobs and remote layers it asks.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Sequence

from cvs_tasks import backends, schedulers
from cvs_tasks.config.errors import ConfigError
from cvs_tasks.config.layout import layout_problems
from cvs_tasks.errors import BadInput, CvsError

if TYPE_CHECKING:
    from cvs_tasks.config import Cluster, Combo, HostSpec, Suite

SuiteName = Literal["single", "distributed"]


@dataclass(frozen=True)
class RunPlan:
    suite: Suite
    cluster: Cluster
    mode: SuiteName
    hosts: tuple[HostSpec, ...]
    env: dict[str, str] = field(default_factory=dict)  # container.env + NNODES

    @property
    def backend(self) -> str:
        """The backend's name (``cvs_tasks.backends.get`` gives the object)."""
        return self.suite.backend

    @property
    def backend_label(self) -> str:
        return backends.get(self.suite.backend).label

    @property
    def distributed(self) -> bool:
        return self.mode == "distributed"

    @property
    def nnodes(self) -> int:
        return len(self.hosts)

    @property
    def combos(self) -> list[Combo]:
        return list(self.suite.combos)

    @property
    def combo_ids(self) -> list[str]:
        return [c.id for c in self.suite.combos]

    def combo(self, combo_id: str) -> Combo:
        for c in self.suite.combos:
            if c.id == combo_id:
                return c
        known = ", ".join(self.combo_ids)
        raise BadInput(f"--combo {combo_id!r} is not in sweep.runs of {self.suite.config_path} (known: {known})")

    @property
    def model_name(self) -> str:
        return str(self.suite.config.train_params.get("model_name", "model"))

    def manifest_fields(self) -> dict[str, Any]:
        cfg = self.suite.config
        return {
            "suite": self.mode,
            "backend": self.backend_label,
            "image": cfg.container.image,
            "runtime": cfg.container.runtime.name,
            "gpu_name": cfg.gpu_name,
            "gpus_per_node": cfg.gpus_per_node,
            "hosts": [h.address for h in self.hosts],
            "model_name": self.model_name,
            "enforce_thresholds": cfg.enforce_thresholds,
            "combos": self.combo_ids,
        }


def suite_from_name(config_name: str) -> SuiteName | None:
    stem = config_name.lower()
    if "_distributed" in stem or "-distributed" in stem:
        return "distributed"
    if "_single" in stem or "-single" in stem:
        return "single"
    return None


def choose_suite(explicit: str | None, config_name: str, host_count: int) -> SuiteName:
    """Pick the suite and refuse a suite/cluster mismatch with a message that says what to do."""
    if explicit is not None and explicit not in ("single", "distributed"):
        raise BadInput(f"--suite must be 'single' or 'distributed', not {explicit!r}")
    named = suite_from_name(config_name)
    suite: SuiteName = explicit or named or ("distributed" if host_count > 1 else "single")  # type: ignore[assignment]
    if explicit and named and explicit != named:
        raise BadInput(
            f"--suite {explicit} does not match the config {config_name} (a {named} config); "
            f"use a *_{explicit}.json config or drop --suite"
        )
    if suite == "single" and host_count != 1:
        raise BadInput(
            f"{config_name} is a single-node config but the cluster file lists {host_count} hosts; "
            "use a cluster file with one host (e.g. cluster/localhost.json) or a *_distributed.json config"
        )
    if suite == "distributed" and host_count < 2:
        raise BadInput(
            f"{config_name} is a distributed config but the cluster file lists {host_count} host; "
            "list every node in node_dict, or use a *_single.json config"
        )
    return suite


def check_launch_layout(suite: Suite, nnodes: int | None, *, distributed: bool) -> None:
    """Batch / parallel sizes Megatron would assert on (`nnodes` known) and what the family's launcher
    script cannot do (pins one node, caps the iterations): one ConfigError (exit 2) listing them all."""
    from cvs_tasks.jobs.contracts import contract_problems

    problems = layout_problems(suite.config, suite.combos, nnodes) if nnodes else []
    problems += contract_problems(suite, distributed=distributed)
    if problems:
        raise ConfigError(suite.config_path, problems)


def check_runtime_settings(suite: Suite) -> None:
    """The container settings as the runtime will read them (BadInput, exit 2): the same check for
    `config.validate`, `--dry-run` and a run, before anything touches a node."""
    from cvs_tasks.remote.docker_cmd import container_spec

    container_spec(suite.config.container)


def check_plan_ready(plan: RunPlan) -> None:
    """Multi-node settings and the HF token a gated tokenizer needs (``config.readiness``), exit 2."""
    from cvs_tasks.config.readiness import check_ready

    scheduled = schedulers.for_cluster(plan.cluster).assigns_nodes  # no node is known before the run
    hosts = None if scheduled else [(h.name, h.address) for h in plan.hosts]
    check_ready(plan.suite, hosts, plan.distributed, str(plan.cluster.path), scheduled=scheduled)


def ready_or_refused(plan: RunPlan) -> tuple[object | None, list[str]]:
    """``check_plan_ready`` and the launcher probe (``check_launcher``): one ConfigError with every
    problem of both, else (the hosts the probe connected or None, warnings)."""
    try:
        check_plan_ready(plan)
    except ConfigError as exc:
        return check_launcher(plan, exc)
    return check_launcher(plan)


def check_launcher(plan, refused: ConfigError | None = None) -> tuple[object | None, list[str]]:
    """What the image's launcher and the nodes must confirm for this plan (MXFP read by the script,
    RDMA links a family script indexes, DATA_CACHE_PATH on several nodes): one ConfigError (exit 2) with every
    problem, ``refused``'s (the readiness checks') too, else the warnings (what could not be told)
    and the hosts it connected (None when nothing was asked; the caller keeps or closes them). A
    scheduled cluster has no nodes yet: only a warning."""
    from cvs_tasks.jobs.contracts import launcher_findings, launcher_needs, scripts_to_probe

    needs = launcher_needs(plan.suite, distributed=plan.distributed)
    if not needs:
        if refused is not None:
            raise refused
        return None, []
    scheduler = schedulers.for_cluster(plan.cluster)
    if scheduler.assigns_nodes:  # what would be refused is worth a line; the rest is not
        if refused is not None:
            raise refused
        return None, [f"{need.where}: not checked before the {scheduler.label} allocation whether the launcher can "
                      f"do it; if not: {need.otherwise}" for need in needs if need.refuse]
    from cvs_tasks.remote import connect
    from cvs_tasks.remote.launcher import probe_launcher

    container = plan.suite.config.container
    hosts = connect(plan.cluster)
    try:
        answer = probe_launcher(hosts, container.runtime.name, container.image, scripts_to_probe(needs),
                                any(need.links for need in needs))
    except CvsError as exc:  # the nodes could not be asked: the run's own start will say why
        hosts.close()
        if refused is not None:
            raise refused from None
        return None, [f"launcher not checked: {exc}"]
    problems, warnings = launcher_findings(needs, answer)
    if refused is not None or problems:
        hosts.close()
        raise ConfigError(plan.suite.config_path, [*(refused.problems if refused else ()), *problems])
    return hosts, warnings


def make_plan(suite: Suite, cluster: Cluster, *, explicit_suite: str | None = None) -> RunPlan:
    check_scheduled_runtime(suite, cluster)
    check_runtime_settings(suite)
    hosts = tuple(cluster.hosts) or schedulers.for_cluster(cluster).placeholders(cluster)
    mode = choose_suite(explicit_suite, suite.config_path.name, len(hosts))
    check_launch_layout(suite, len(hosts), distributed=mode == "distributed")
    env = dict(suite.config.container.env)
    env["NNODES"] = str(len(hosts))
    return RunPlan(suite=suite, cluster=cluster, mode=mode, hosts=hosts, env=env)


def check_scheduled_runtime(suite: Suite, cluster: Cluster) -> None:
    """The suite's container runtime must run on the cluster's nodes: its scheduler says (BadInput)."""
    schedulers.for_cluster(cluster).check_runtime(suite, cluster)


def with_hosts(plan: RunPlan, hosts: Sequence[HostSpec]) -> RunPlan:
    """The plan on the nodes an allocation gave: rank order as given, MASTER_ADDR the first node.

    Over SSH the user names MASTER_ADDR; with a scheduler nobody knows it before the allocation.
    """
    if len(hosts) != plan.nnodes:
        raise BadInput(f"the allocation has {len(hosts)} node(s), the plan {plan.nnodes}")
    env = {**plan.env, "MASTER_ADDR": hosts[0].address}
    return replace(plan, hosts=tuple(hosts), env=env)
