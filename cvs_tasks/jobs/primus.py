"""Primus, the backend: ``primus-cli direct -- train pretrain`` with an experiment YAML from the image
and the combo's overrides.

Everything that is Primus's lives here: which YAML to look for and how to read its experiment
header, where its checkpoints land, how each override is spelled so every Primus version parses it
(docs/primus_overrides.md), the wrapper script and launch, and the ``Backend`` object. primus-cli
tees the worker output into ``--log_file`` itself, so the launcher console is kept in a separate
``console.log`` (the runner's own lines go to the console only), and training.log gets each worker
line once. Primus takes its tokenizer by repo id from the YAML, saves and resumes checkpoints (the
checkpoint test), and its memory figure (hip ``usage_ratio``) is recorded rather than gated by the
shipped optional spec. The YAML is looked up on node 0 before the first job, once per run, by the
lifecycle (``EXPERIMENT``).
"""

from __future__ import annotations

import re
from typing import Any

from cvs_tasks import backends, runtimes
from cvs_tasks.backends import Backend
from cvs_tasks.jobs import layout
from cvs_tasks.jobs.shell import (
    comment,
    detached_start,
    env_export_lines,
    finish_function,
    hf_token_export,
    q,
    say,
)
from cvs_tasks.jobs.spec import JobSetupError, JobSpec, LaunchPlan, NodeLaunch
from cvs_tasks.judge.reference import primus_numbers

YAML_DIR = "examples/megatron/configs"
# MI300X/MI325X need the atomic-FP32 attention kernels (docs/reference_suite.md#primus-command).
ATOMIC_FP32_GPUS = ("MI300X", "MI325X")
ATOMIC_FP32_EXPORTS = ("PRIMUS_TURBO_ATTN_V3_ATOMIC_FP32", "NVTE_CK_IS_V3_ATOMIC_FP32")
YAML_FALLBACK = {"MI325X": "MI300X"}
CHECKPOINTS_SUBDIR = "checkpoints"
# The experiment YAML's header: Primus saves under <workspace>/<work_group>/<user_name>/<exp_name>.
EXPERIMENT_KEYS = ("workspace", "work_group", "user_name", "exp_name")
EMPTY = '""'
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::([^}]*))?\}")


def primus_yaml_candidates(job: JobSpec) -> list[str]:
    """Experiment YAMLs to try, relative to primus_root, newest Primus layout first: per GPU (then
    its fallback) ``<GPU>/<model>-<PREC>-pretrain.yaml`` (v0.6.0+) and ``<GPU>/<model>-pretrain.yaml``
    (v0.5.0, precision by override), then ``<model>-pretrain.yaml`` (v0.4.0)."""
    model = job.require_param("model_name")
    gpu = job.gpu_name.strip().upper()
    gpus = [gpu] + ([YAML_FALLBACK[gpu]] if gpu in YAML_FALLBACK else [])
    per_gpu = [f"{YAML_DIR}/{g}/{model}-{name}" for g in gpus
               for name in (f"{job.precision}-pretrain.yaml", "pretrain.yaml")]
    return [*per_gpu, f"{YAML_DIR}/{model}-pretrain.yaml"]


def precision_override(job: JobSpec, yaml_path: str) -> str:
    """`` --fp8 hybrid`` when the YAML does not name the precision (Primus up to v0.5.0) and FP8 is
    asked; BF16 is those YAMLs' own. Any other precision cannot be selected there: refused."""
    if yaml_path.endswith(f"-{job.precision}-pretrain.yaml"):
        return ""
    precision = job.precision.strip().upper()
    if precision == "FP8":
        return " --fp8 hybrid"
    if precision == "BF16":
        return ""
    raise JobSetupError(f"{yaml_path} does not name a precision (Primus up to v0.5.0 selects FP8 with "
                        f"--fp8 hybrid); {job.precision} cannot be selected on this image: use FP8 or BF16, "
                        "or an image with <model>-<precision>-pretrain.yaml configs",
                        field="sweep.combinations")


def yaml_check_command(candidates: list[str], primus_root: str) -> str:
    """Prints ``EXISTS <path>`` or ``MISSING <path>`` per candidate, in order, then the experiment
    header (``HEADER workspace: …`` etc.) of the first that exists: one round trip."""
    words = " ".join(q(c) for c in candidates)
    keys = "|".join(EXPERIMENT_KEYS)
    return (
        f"cd {q(primus_root)} && found= && for f in {words}; do "
        f'if [ -f "$f" ]; then echo "EXISTS $f"; [ -n "$found" ] || found=$f; '
        f'else echo "MISSING $f"; fi; done; '
        f"[ -z \"$found\" ] || grep -E '^({keys}):' -- \"$found\" | sed 's/^/HEADER /'; true"
    )


def pick_existing_yaml(output: str) -> str | None:
    """The first candidate ``yaml_check_command`` reported as existing, or None."""
    for line in output.splitlines():
        word, _, path = line.strip().partition(" ")
        if word == "EXISTS" and path:
            return path
    return None


def experiment_header(output: str) -> dict[str, str]:
    """The ``workspace``/``work_group``/``user_name``/``exp_name`` values ``yaml_check_command``
    printed, unquoted and without trailing comments (placeholders left as written)."""
    header: dict[str, str] = {}
    for line in output.splitlines():
        word, _, rest = line.strip().partition(" ")
        key, colon, value = rest.partition(":")
        if word == "HEADER" and colon and key in EXPERIMENT_KEYS:
            header[key] = value.split(" #", 1)[0].strip().strip("\"'")
    return header


def checkpoint_root(workspace: str, header: dict[str, str], env: dict[str, str]) -> str | JobSetupError:
    """The folder Primus saves ``checkpoints/`` under: ``<workspace>/<work_group>/<user_name>/<exp_name>``
    as its YAML resolves them (``${VAR:default}`` from the environment, empty parts dropped).

    The wrapper exports ``PRIMUS_WORKSPACE`` and empties team, user and experiment, so a YAML that
    reads them gives ``<workspace>``; one that pins a value keeps it (the 405B YAML pins
    ``exp_name: exp-llama3_405B-pretrain``). A pinned ``workspace`` would save outside the checkpoint
    directory: refused."""
    exported = {**env, **workspace_exports(workspace)}
    written = {"workspace": "${PRIMUS_WORKSPACE}", **header}  # no workspace line: taken as the export
    parts = {}
    for key in EXPERIMENT_KEYS:
        value = _resolve_placeholders(written.get(key, ""), exported)
        if value is None:
            return JobSetupError(f"the Primus experiment YAML's {key}: {header.get(key)!r} needs an environment "
                                 "variable the job does not set; set it in container.env",
                                 field="container.env")
        parts[key] = value
    if parts["workspace"].rstrip("/") != workspace.rstrip("/"):
        return JobSetupError(f"the Primus experiment YAML pins workspace: {header.get('workspace')!r}, so its "
                             f"checkpoints would land in {parts['workspace']!r}, not in {workspace!r}; use a YAML "
                             "whose workspace reads ${PRIMUS_WORKSPACE:...}", field="checkpoint.checkpoint_dir")
    inner = [parts[k].strip("/") for k in ("work_group", "user_name", "exp_name") if parts[k].strip("/")]
    return "/".join([workspace.rstrip("/"), *inner])


def workspace_exports(workspace: str) -> dict[str, str]:
    """What a checkpoint phase's wrapper exports so Primus saves straight under ``workspace``."""
    return {"PRIMUS_WORKSPACE": workspace, "PRIMUS_TEAM": "", "PRIMUS_USER": "", "PRIMUS_EXP_NAME": ""}


def _resolve_placeholders(value: str, env: dict[str, str]) -> str | None:
    """Primus's ``${VAR:default}`` (an empty but set VAR stays empty) and ``${VAR}`` (must be set)."""
    missing = False

    def one(match: re.Match) -> str:
        nonlocal missing
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if default is None:
            missing = True
            return ""
        return default

    resolved = _PLACEHOLDER.sub(one, value)
    return None if missing else resolved


def missing_yaml_message(candidates: list[str], primus_root: str) -> str:
    root = primus_root.rstrip("/")
    tried = ", ".join(f"{root}/{c}" for c in candidates)
    return (
        f"Primus experiment YAML not found in the image: tried {tried}; pick a "
        f"train_params.model_name / precision this image ships under {root}/{YAML_DIR}/, "
        f"or use an image that has it"
    )


def missing_yaml_error(candidates: list[str], primus_root: str) -> JobSetupError:
    return JobSetupError(missing_yaml_message(candidates, primus_root),
                         field="train_params.model_name")


def resume_load_dir(root: str) -> str:
    """What the resume phase passes as ``--load``: where Primus saved, ``<root>/checkpoints`` with
    ``root`` from ``checkpoint_root`` (the checkpoint directory itself unless the YAML pins a part)."""
    return f"{root.rstrip('/')}/{CHECKPOINTS_SUBDIR}"


def checkpoint_workspace(job: JobSpec) -> str | None:
    """PRIMUS_WORKSPACE for a checkpoint phase: the save dir, or the load dir's checkpoint root."""
    if job.save_dir:
        return job.save_dir.rstrip("/") or "/"
    if job.load_dir:
        load = job.load_dir.rstrip("/")
        suffix = "/" + CHECKPOINTS_SUBDIR
        return load[: -len(suffix)] if load.endswith(suffix) and load != suffix else load
    return None


def typed(value: bool | int | None) -> str:
    """An override's text that every supported Primus parser turns back into ``value``.

    ``True`` / ``False`` / ``None`` and plain decimal ints: v0.4.0 and v0.5.0 evaluate the text,
    v0.6.0 also maps ``true``/``false``, HEAD maps ``true``/``false``, exactly ``None`` and ints.
    ``false``, ``null`` and ``none`` stay strings on some of them (a string 'false' is true in
    Python; ``recompute_granularity='null'`` stops Megatron at start): docs/primus_overrides.md."""
    if value is None or isinstance(value, bool):
        return repr(value)
    return str(int(value))


def _int_text(text: str) -> str:
    """A whole number as ``typed`` spells it (``08`` would stay a string where Primus evaluates it);
    any other text is passed quoted, as given, for Primus and Megatron to refuse."""
    text = str(text).strip()
    return typed(int(text)) if text.isascii() and text.isdigit() else q(text)


def suite_overrides(job: JobSpec) -> str:
    """Sequence length, recompute and FSDP as overrides: values not passed come from the experiment
    YAML (the 70B YAML turns FSDP2 on, the 405B one has no recompute), whatever the suite says.
    Every value is spelled so each Primus version parses it to the Python value Megatron needs."""
    recompute = ("--recompute_granularity full --recompute_method uniform --recompute_num_layers 1"
                 if job.param("recompute") == "1" else f"--recompute_granularity {typed(None)}")
    fsdp = typed(job.param("fsdp") == "1")
    return f" --seq_length {_int_text(job.param('sequence_length'))} {recompute} --use_torch_fsdp2 {fsdp}"


def train_arguments(job: JobSpec, yaml_path: str) -> str:
    """``--config … --micro_batch_size … --tensor_model_parallel_size … [--save …|--load …]``."""
    args = (
        f"--config {q(yaml_path)} --micro_batch_size {_int_text(job.mbs)} "
        f"--global_batch_size {_int_text(job.gbs)} --train_iters {typed(job.iterations)} "
        f"--tensor_model_parallel_size {_int_text(job.param('tensor_parallelism'))} "
        f"--pipeline_model_parallel_size {_int_text(job.param('pipeline_parallelism'))}"
        f"{suite_overrides(job)}{precision_override(job, yaml_path)}"
    )
    if job.save_interval:
        args += f" --save --save_interval {typed(job.save_interval)}"
    if job.load_dir:
        args += f" --load {q(job.load_dir)}"
        if job.distributed:
            args += " --auto_detect_ckpt_format"
    return args


def wrapper_script(job: JobSpec, rank: int, yaml_path: str, warnings: list[str]) -> str:
    root = job.param("primus_root")
    lines = [
        "#!/bin/bash",
        comment(f"cvs-tasks Primus wrapper: {job.label}, node {rank} of {job.nnodes}, run {job.run_id}"),
        "set -u",
        *finish_function(layout.exit_path(job, rank)),
    ]
    if job.hf_token_path:
        lines.append(hf_token_export(job.hf_token_path))
    lines.append(f"export LOG_DIR={q(job.log_dir)}")
    if job.gpu_name.strip().upper() in ATOMIC_FP32_GPUS:
        lines += [f"export {name}=1" for name in ATOMIC_FP32_EXPORTS]
    workspace = checkpoint_workspace(job)
    if workspace:
        exports = workspace_exports(workspace)
        lines += [f"export {name}={q(value) if value else EMPTY}" for name, value in exports.items()]
    if runtimes.get(job.runtime).wrapper_exports_env:  # no `docker run -e`: the wrapper exports the env
        env_lines, env_warnings = env_export_lines(job.env)
        lines += env_lines
        warnings += [w for w in env_warnings if w not in warnings]
    node_rank = rank if job.distributed else 0
    lines += [
        f"cd {q(root)} || {{ echo {say(f'cannot cd to {root} (train_params.primus_root)')} >&2; "
        f"cvs_finish 1; }}",
        f"NODE_RANK={node_rank} bash {q(job.param('primus_cli'))} direct "
        f"--log_file {q(layout.node_log_path(job, rank))} -- train pretrain "
        f"{train_arguments(job, yaml_path)}",
        'cvs_finish "$?"',
    ]
    return "\n".join(lines) + "\n"


def build_primus_launch(job: JobSpec, primus_yaml: str | None = None) -> LaunchPlan:
    """One wrapper per node; ``primus_yaml`` is the checked YAML (default: the first candidate)."""
    warnings: list[str] = []
    yaml_path = primus_yaml or primus_yaml_candidates(job)[0]
    if job.save_interval and not job.save_dir:
        raise JobSetupError(
            f"job '{job.label}' saves checkpoints (save_interval {job.save_interval}) but has no "
            f"checkpoint directory; set checkpoint.checkpoint_dir (distributed) or paths.log_dir",
            field="checkpoint.checkpoint_dir")
    nodes = []
    for rank in range(job.nnodes):
        node_dir = layout.node_dir(job, rank)
        console = f"{node_dir}/{layout.CONSOLE_FILE}"
        nodes.append(NodeLaunch(
            rank=rank,
            script_path=layout.script_path(job, rank),
            script_text=wrapper_script(job, rank, yaml_path, warnings),
            launch_command=detached_start(
                layout.script_path(job, rank), node_dir, console,
                layout.exit_path(job, rank), layout.pid_path(job, rank)),
            log_path=layout.node_log_path(job, rank),
            exit_path=layout.exit_path(job, rank),
            pid_path=layout.pid_path(job, rank),
            console_path=console,
        ))
    return LaunchPlan(backend=job.backend, label=job.label, combo_log_dir=layout.combo_log_dir(job),
                      prepare=layout.prepare_commands(job), nodes=nodes, warnings=warnings)


# --- the backend ----------------------------------------------------------------------------------
EXPERIMENT = "cvs_tasks.lifecycle.jobrun:primus_experiment"
"""The YAML lookup: one round trip to node 0 through the run's session (I/O, so in the lifecycle),
named here so this module stays below it."""


class Primus(Backend):
    name = "primus"
    label = "Primus"
    dialect = "primus"
    tokenizer_note = "takes the HF repo id from its YAML"
    checkpoint_test = True
    memory_record_only = True

    def matches(self, image: str) -> bool:
        return "primus" in image.lower()

    def build_launch(self, job, experiment):
        return build_primus_launch(job, experiment)

    def experiment(self, session, job) -> str | None:
        return backends.named(EXPERIMENT)(session, job)[0]

    def asked(self, job) -> dict[str, Any]:
        return {"launcher": "primus", "script": "primus-cli"}  # tokenizer and mock data come from the YAML

    def reference_numbers(self, iterations, summary):
        return primus_numbers(iterations)


PRIMUS = Primus()
"""Registered by ``cvs_tasks.backends`` (``SHIPPED``)."""
