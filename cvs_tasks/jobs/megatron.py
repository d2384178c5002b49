"""Megatron-LM, the backend: the ROCm images' family launchers (train_llama3.sh, …), run in the
foreground by a wrapper; the fallback for any image no other backend claims.

Everything that is Megatron-LM's lives here: the wrapper script and launch (the wrapper exports what
the launcher reads, docs/reference_suite.md#megatron-lm-wrapper, docs/launch_contracts.md#family-table,
runs it and records its exit status), the family launchers' contracts (what is refused at load and
what the image and the nodes must confirm before a run, docs/launch_contracts.md), and the
``Backend`` object that says what only it does: a local tokenizer for the families whose launcher
needs the file, the Broadcom NIC library copy on distributed runs, what its wrapper asks the
trainer, and the reference suite's aggregation from the launcher's summary lines. The family
table itself is ``cvs_tasks.families``.

The image's own tee copy (``${LOG_DIR}/output_${EXP_NAME}.log``; no script honours TRAIN_LOG) is
pointed into the node's per-combo folder through LOG_DIR, instead of editing the launcher in the
image with sed, as the reference did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cvs_tasks import runtimes
from cvs_tasks.backends import Backend
from cvs_tasks.config.errors import Problem, join_path
from cvs_tasks.families import (
    GENERIC_NAMES,
    Family,
    launcher_family_names,
    megatron_family,
    normalise_precision,
    precision_env,
)
from cvs_tasks.jobs import layout
from cvs_tasks.jobs.contracts import Need
from cvs_tasks.jobs.nic import broadcom_gid_index, needs_broadcom_setup
from cvs_tasks.jobs.shell import (
    comment,
    detached_start,
    env_export_lines,
    finish_function,
    hf_token_export,
    q,
    rocm_detect_lines,
    rocm_dir_is_set,
    say,
)
from cvs_tasks.jobs.spec import PARAM_DEFAULTS, JobSetupError, JobSpec, LaunchPlan, NodeLaunch
from cvs_tasks.jobs.tokenizer import needs_local_tokenizer, tokenizer_file
from cvs_tasks.judge.reference import megatron_numbers

if TYPE_CHECKING:
    from cvs_tasks.config import Suite

EXP_NAME = "megatron_training"
_ROCM_VAR = "cvs_rocm_dir"


def launcher_script(job: JobSpec, family: Family | None) -> str:
    """Absolute path of the launcher: ``train_params.training_script`` wins over the family table."""
    root = job.param("megatron_root").rstrip("/")
    override = job.param("training_script")
    if override:
        return override if override.startswith("/") else f"{root}/{override}"
    if family is None:
        raise JobSetupError(
            f"train_params.tokenizer_model {job.param('tokenizer_model')!r} matches no "
            f"Megatron-LM model family ({launcher_family_names()}); set train_params.training_script to "
            f"the launcher script (relative to megatron_root {root})",
            field="train_params.tokenizer_model",
        )
    return f"{root}/{family.script}"


def inline_assignments(job: JobSpec, family: Family | None,
                       precision_pairs: tuple[tuple[str, str], ...], rank: int) -> str:
    """The launcher's inline env, in the reference's order (docs/reference_suite.md#megatron-lm-wrapper), with
    the family's names; then NODE_RANK.

    e.g. ``RECOMPUTE=0 SEQ_LENGTH=8192 MBS=4 BS=128 TP=1 PP=1 FSDP=0 MODEL_SIZE=8
    TOTAL_ITERS=20 TE_FP8=1 NODE_RANK=0``.
    """
    names = family or GENERIC_NAMES
    recompute = job.param("recompute")
    if recompute in ("0", "1"):
        recompute = names.recompute_values[int(recompute)]
    pad = [(names.pad_var, job.param("sequence_length"))] if names.pad_var else []
    pairs = [
        (names.recompute_var, recompute),
        (names.seq_var, job.param("sequence_length")),
        *pad,
        (names.mbs_var, job.mbs),
        (names.gbs_var, job.gbs),
        (names.tp_var, job.param("tensor_parallelism")),
        (names.pp_var, job.param("pipeline_parallelism")),
        ("FSDP", job.param("fsdp")),
        ("MODEL_SIZE", job.param("model_size")),
        (names.iters_var, str(job.iterations)),
        *precision_pairs,
        ("NODE_RANK", str(rank if job.distributed else 0)),
    ]
    return " ".join(f"{name}={q(value)}" for name, value in pairs)


def _tokenizer_value(job: JobSpec, warnings: list[str]) -> str:
    if job.tokenizer_path:
        return job.tokenizer_path
    if needs_local_tokenizer(job):
        warnings.append(
            f"{job.param('tokenizer_model')} needs a local {tokenizer_file(job)} but none was "
            f"downloaded; passing the repo id (run the tokenizer stage first)"
        )
    return job.param("tokenizer_model")


def wrapper_script(job: JobSpec, rank: int, warnings: list[str]) -> str:
    """The text of node ``rank``'s wrapper; appends anything the user should see to ``warnings``."""
    family = megatron_family(job.param("tokenizer_model"))
    script = launcher_script(job, family)
    pairs, precision_warning = precision_env(family, job.precision)
    if precision_warning and precision_warning not in warnings:
        warnings.append(precision_warning)
    root = job.param("megatron_root")
    lines = [
        "#!/bin/bash",
        comment(f"cvs-tasks Megatron-LM wrapper: {job.label}, node {rank} of {job.nnodes}, run {job.run_id}"),
        "set -u",
        *finish_function(layout.exit_path(job, rank)),
        f"cd {q(root)} || {{ echo {say(f'cannot cd to {root} (train_params.megatron_root)')} >&2; "
        f"cvs_finish 1; }}",
        "export MOCK_DATA=1",
        f"export IMAGE={q(job.image)}",
    ]
    if job.hf_token_path:
        lines.append(hf_token_export(job.hf_token_path))
    lines += [
        f"export DATA_CACHE_PATH={q(job.data_cache_dir)}",
        f"export TOKENIZER_MODEL={q(_tokenizer_value(job, warnings))}",
    ]
    if rocm_dir_is_set(job.rocm_dir):
        rocm = q(job.rocm_dir.rstrip("/") or "/")
    else:
        lines += rocm_detect_lines(_ROCM_VAR)
        rocm = f'"${_ROCM_VAR}"'
    lines += [
        f"export LD_LIBRARY_PATH=/usr/local/lib/:{rocm}/lib${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}",
        # the scripts tee into ${LOG_DIR}/output_${EXP_NAME}.log (and put tensorboard under LOG_DIR),
        # never into TRAIN_LOG: one folder per node and combo, so nothing collides on shared storage
        f"export LOG_DIR={q(layout.node_dir(job, rank))}",
        f"export EXP_NAME={EXP_NAME}",
        "export TORCH_NCCL_ASYNC_ERROR_HANDLING=0",
    ]
    if runtimes.get(job.runtime).wrapper_exports_env:  # no `docker run -e`: the wrapper exports the env
        env_lines, env_warnings = env_export_lines(job.env)
        lines += env_lines
        warnings += [w for w in env_warnings if w not in warnings]
    if needs_broadcom_setup(job):
        lines.append(f"export NCCL_IB_GID_INDEX={q(broadcom_gid_index(job.env))}")
    lines += [
        f"{inline_assignments(job, family, pairs, rank)} bash {q(script)}",
        'cvs_finish "$?"',
    ]
    return "\n".join(lines) + "\n"


def build_megatron_launch(job: JobSpec) -> LaunchPlan:
    """One wrapper per node; stdout+stderr of the whole job go to ``out-node<i>/training.log``."""
    warnings: list[str] = []
    if job.save_dir or job.load_dir:
        warnings.append("checkpoint save/resume is Primus-only; ignored for the Megatron-LM job")
    nodes = []
    for rank in range(job.nnodes):
        log_path = layout.node_log_path(job, rank)
        nodes.append(NodeLaunch(
            rank=rank,
            script_path=layout.script_path(job, rank),
            script_text=wrapper_script(job, rank, warnings),
            launch_command=detached_start(
                layout.script_path(job, rank), layout.node_dir(job, rank), log_path,
                layout.exit_path(job, rank), layout.pid_path(job, rank)),
            log_path=log_path,
            exit_path=layout.exit_path(job, rank),
            pid_path=layout.pid_path(job, rank),
            console_path=log_path,
        ))
    return LaunchPlan(backend=job.backend, label=job.label, combo_log_dir=layout.combo_log_dir(job),
                      prepare=layout.prepare_commands(job), nodes=nodes, warnings=warnings)


# --- the family launchers' contracts (docs/launch_contracts.md) ---------------------------------
# A script that pins one node runs N independent single-node jobs when launched on N nodes; one
# that passes `--exit-interval N` never trains past step N: both are refused at load (exit 2).
# What differs between images (which env names the script reads, how many RDMA links a node has)
# is asked of the image and the nodes before the run (``jobs.contracts``, the launcher probe).
def family_contract_problems(suite: Suite, *, distributed: bool) -> list[Problem]:
    """Every combo (and the smoke cell) the Megatron-LM family script cannot run as configured."""
    problems: list[Problem] = []
    config = suite.config
    pinned: set[str] = set()
    for combo in suite.combos:
        params = combo.train_params
        if str(params.get("training_script", "")).strip():
            continue  # the user's own launcher: its contract is unknown
        family = megatron_family(str(params.get("tokenizer_model", "")))
        if family is None:
            continue
        script = family.script.rsplit("/", 1)[-1]
        if family.pins_one_node and distributed and family.name not in pinned:
            pinned.add(family.name)
            problems.append(("train_params.tokenizer_model", (
                f"{script} (the {family.name} launcher of Megatron-LM images) pins NNODES=1, NODE_RANK=0 and "
                "MASTER_ADDR=localhost: on several nodes it runs one independent single-node job per node, "
                "not one distributed run; use a *_single config, or a Primus image for a multi-node run")))
        limit = family.exit_interval
        iterations = str(params.get("training_iterations", ""))
        if limit and iterations.isdigit() and int(iterations) > limit:
            overlay = config.sweep.combinations.get(combo.id, {})
            where = (join_path(join_path("sweep.combinations", combo.id), "training_iterations")
                     if "training_iterations" in overlay else "train_params.training_iterations")
            if where not in {path for path, _ in problems}:
                problems.append((where, f"{iterations} iterations, but {script} passes --exit-interval {limit}: "
                                        f"training stops at step {limit}; set {limit} or fewer"))
        if limit and combo is suite.combos[0] and config.smoke.enabled and config.smoke.iters > limit:
            problems.append(("smoke.iters", f"{config.smoke.iters} iterations, but {script} passes "
                                            f"--exit-interval {limit}; set {limit} or fewer"))
    return problems


def family_launcher_needs(suite: Suite, *, distributed: bool) -> list[Need]:
    """What the combos (and the smoke cell) of a Megatron-LM suite need of their family launcher."""
    config = suite.config
    needs: list[Need] = []
    for combo in suite.combos:
        params = combo.train_params
        family = megatron_family(str(params.get("tokenizer_model", "")))
        if family is None or str(params.get("training_script", "")).strip():
            continue  # the user's own launcher: its contract is unknown
        root = str(params.get("megatron_root") or PARAM_DEFAULTS["megatron_root"]).rstrip("/")
        script = f"{root}/{family.script}"
        cells = [(_precision_where(config, combo), combo.precision)]
        if combo is suite.combos[0] and config.smoke.enabled:
            cells.append(("smoke.precision", config.smoke.precision))
        for where, precision in cells:
            need = _precision_need(family, script, where, precision)
            if need:
                needs.append(need)
        if distributed and family.data_cache_var:
            needs.append(Need("paths.data_cache_dir", script, family.data_cache_var, refuse=False, otherwise=(
                "paths.data_cache_dir is not used: each node builds the dataset index cache in the script's own "
                "default folder (the Feb-2025 ROCm Megatron-LM script does this). With mock data nothing changes; "
                "with real data, keep the data and its cache on storage every node shares, or use a newer image")))
        if family.rdma_links:
            needs.append(Need("train_params.tokenizer_model", script, links=family.rdma_links, otherwise=(
                f"reads {family.rdma_links} RDMA links (links[i] for i in range({family.rdma_links})) and, under "
                "`set -e`, exits before torchrun on a node with fewer: nothing trains")))
    return list(dict.fromkeys(needs))


def _precision_where(config, combo) -> str:
    if combo.id in config.sweep.combinations:
        return join_path("sweep.combinations", combo.id)
    return "train_params.precision"


def _precision_need(family: Family, script: str, where: str, precision: str) -> Need | None:
    key = normalise_precision(precision)
    if key not in family.precision_needs:
        return None
    name, instead = family.precision_needs[key]
    return Need(where, script, name, otherwise=(
        f"{key} is selected by {name}, which only the 2026 ROCm Megatron-LM scripts read: this one would train "
        f"{instead} and the run would be reported as {key}; use an image whose "
        f"{family.script.rsplit('/', 1)[-1]} reads {name}, or drop {key} from the sweep"))


# --- the backend ----------------------------------------------------------------------------------
class Megatron(Backend):
    name = "megatron"
    label = "Megatron-LM"
    dialect = "megatron"
    fallback = True
    local_tokenizer = True
    broadcom_nic_setup = True

    def matches(self, image: str) -> bool:
        return True  # the fallback: an image no other backend claims

    def build_launch(self, job, experiment):
        return build_megatron_launch(job)

    def size_problem(self, what: str, size) -> str | None:
        if not size.megatron:  # no Megatron-LM family launcher trains it (Llama 3.1 405B)
            return f"{what} runs only on Primus; use a Primus image (its name contains 'primus')"
        return None

    def contract_problems(self, suite, *, distributed):
        return family_contract_problems(suite, distributed=distributed)

    def launcher_needs(self, suite, *, distributed):
        return family_launcher_needs(suite, distributed=distributed)

    def asked(self, job) -> dict[str, Any]:
        """The family launcher (or the user's own script), the tokenizer it was given, MOCK_DATA=1."""
        family = megatron_family(job.param("tokenizer_model"))
        override = job.param("training_script")
        return {
            "launcher": family.name if family and not override else "generic",
            "script": (override or (family.script if family else "the launcher")).rsplit("/", 1)[-1],
            "tokenizers": tuple(t for t in (job.tokenizer_path, job.param("tokenizer_model")) if t),
            "mock_data": True,  # the wrapper exports MOCK_DATA=1
        }

    def reference_numbers(self, iterations, summary):
        return megatron_numbers(iterations, summary)


MEGATRON = Megatron()
"""Registered by ``cvs_tasks.backends`` (``SHIPPED``)."""
