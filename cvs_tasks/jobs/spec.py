"""What a job is (JobSpec), what building it yields (LaunchPlan), and the one entry point that builds
it (``build_launch``, through the job's backend) and renders it for a dry run. No I/O.

The lifecycle resolves config + cluster + combo into one JobSpec; the backend's builder
(``Backend.build_launch``) turns it into the exact scripts and commands each node runs. Keeping
both sides as frozen data lets the builders be tested with exact strings and lets `--dry-run`
print what would run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cvs_tasks import backends, runtimes
from cvs_tasks.config.sweep import TRAIN_PARAM_DEFAULTS
from cvs_tasks.errors import BadInput
from cvs_tasks.identifiers import identifier_problem
from cvs_tasks.jobs.shell import comment

# train_params defaults (docs/reference_suite.md#config-defaults): the config's, plus where the jobs find things.
PARAM_DEFAULTS: Mapping[str, str] = {
    **TRAIN_PARAM_DEFAULTS,
    "megatron_root": "/workspace/Megatron-LM",
    "primus_root": "/workspace/Primus",
    "primus_cli": "runner/primus-cli",
    "hca_id_pattern": "bnxt_|rocep",
}


class JobSetupError(BadInput):
    """A job cannot be built or started as configured; says which setting to change.

    Builders return it as a value where the brief asks for one (the caller decides whether to
    raise it or record it), and raise it where no plan can be produced at all.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class JobSpec:
    """One fully resolved training job (one combo, or smoke / checkpoint phase / tokenizer check).

    ``env`` is container.env plus NNODES: already inside a docker container (``docker run -e``);
    the wrapper exports it itself where the runtime says so (``wrapper_exports_env``: host, pyxis).
    ``hf_token_path`` names a 0600 file on the node (same path in the container); the token is
    read from it at run time only. Primus checkpoint phases:
    ``save_dir`` is the checkpoint directory (PRIMUS_WORKSPACE; set in both phases),
    ``save_interval`` makes it the save phase (``--save --save_interval K``), ``load_dir`` the
    resume phase (``--load <load_dir>``, normally ``resume_load_dir(save_dir)``).
    """

    backend: str  # a registered backend's name (cvs_tasks.backends)
    label: str
    gpu_name: str
    image: str
    runtime: str  # a registered runtime's name (cvs_tasks.runtimes)
    nnodes: int
    distributed: bool
    mbs: str
    gbs: str
    precision: str
    iterations: int
    train_params: Mapping[str, str]
    log_dir: str
    scripts_dir: str
    data_cache_dir: str
    rocm_dir: str
    env: Mapping[str, str]
    hf_token_path: str | None
    tokenizer_path: str | None
    save_dir: str | None
    save_interval: int | None
    load_dir: str | None
    run_id: str

    def __post_init__(self) -> None:
        if backends.find(self.backend) is None:
            raise JobSetupError(f"job '{self.label}': unknown backend {self.backend!r} "
                                f"(known: {', '.join(backends.names())})", field="container.image")
        if runtimes.find(self.runtime) is None:
            raise JobSetupError(f"job '{self.label}': unknown runtime {self.runtime!r} "
                                f"(known: {', '.join(runtimes.names())})", field="container.runtime.name")

    def param(self, key: str) -> str:
        """A train_params value, falling back to the documented default ("" if none)."""
        value = self.train_params.get(key)
        if value is None or str(value).strip() == "":
            return PARAM_DEFAULTS.get(key, "")
        return str(value).strip()

    def require_param(self, key: str) -> str:
        """A train_params value that has no default; a missing one is the user's to fix."""
        value = self.param(key)
        if not value:
            raise JobSetupError(
                f"train_params.{key} is required for the {self.backend} job '{self.label}'; "
                f"set it in the config's train_params block",
                field=f"train_params.{key}",
            )
        return value


@dataclass(frozen=True)
class NodeLaunch:
    """Everything one node needs: the wrapper script to write (0700) and the command that starts it.

    ``log_path`` is the training log the watcher tails; ``console_path`` is where the launcher's
    own console goes (the same file for Megatron-LM, ``console.log`` for Primus). The wrapper
    writes its exit status to ``exit_path``; ``pid_path`` holds the wrapper's pid, which is also
    its process-group id (it runs in its own session), so the whole job can be stopped at once.
    """

    rank: int
    script_path: str
    script_text: str
    launch_command: str
    log_path: str
    exit_path: str
    pid_path: str
    console_path: str


@dataclass(frozen=True)
class LaunchPlan:
    """The built job: run ``prepare`` on every node (on the host), write each node's script, launch."""

    backend: str
    label: str
    combo_log_dir: str
    prepare: list[str]
    nodes: list[NodeLaunch]
    warnings: list[str] = field(default_factory=list)


def build_launch(job: JobSpec, *, experiment: str | None = None) -> LaunchPlan:
    """Build every node's wrapper and launch command; raises JobSetupError when none can be built.

    ``experiment`` is the experiment file the backend found in the image (``Backend.experiment``;
    Primus: the YAML ``yaml_check_command`` found, relative to primus_root); without it the
    backend's first choice is used (fine for a dry run).
    """
    for kind, value in (("label", job.label), ("run id", job.run_id)):
        problem = identifier_problem(kind, value)
        if problem:  # names reach node paths and scripts: refuse, never sanitise silently
            raise JobSetupError(f"job {value!r}: {problem}", field=kind)
    if job.nnodes < 1:
        raise JobSetupError(f"job '{job.label}' has no nodes (nnodes={job.nnodes}); "
                            f"the cluster file lists no hosts", field="node_dict")
    if job.iterations < 1:
        raise JobSetupError(f"job '{job.label}' has {job.iterations} training iterations; set "
                            f"train_params.training_iterations to a positive number",
                            field="train_params.training_iterations")
    return backends.get(job.backend).build_launch(job, experiment)


def dry_run_by_node(plan: LaunchPlan) -> list[list[str]]:
    """Per node, the lines a dry run prints: prepare commands, the script to write, the launch."""
    rendered: list[list[str]] = []
    for node in plan.nodes:
        rendered.append([
            f"# node {node.rank}: prepare (on the host)",
            *plan.prepare,
            comment(f"node {node.rank}: write {node.script_path} (mode 0700)"),
            *node.script_text.rstrip("\n").split("\n"),
            f"# node {node.rank}: launch (in the container; on the node itself for runtime host)",
            node.launch_command,
        ])
    return rendered


def render_dry_run(plan: LaunchPlan) -> list[str]:
    """The whole plan as printable lines: a heading, the warnings, then every node's block."""
    lines = [comment(f"{plan.backend} job '{plan.label}', logs under {plan.combo_log_dir}")]
    lines += [comment(f"warning: {w}") for w in plan.warnings]
    for block in dry_run_by_node(plan):
        lines += ["", *block]
    return lines
