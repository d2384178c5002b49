"""Megatron-LM wrapper scripts: the ROCm launcher (train_llama3.sh, …) run in the foreground.

The wrapper exports what the launcher reads (docs/reference_suite.md#megatron-lm-wrapper,
docs/launch_contracts.md#family-table), runs it, and records its exit status. The image's own tee
copy (``${LOG_DIR}/output_${EXP_NAME}.log``; no script honours TRAIN_LOG) is pointed into the node's
per-combo folder through LOG_DIR, instead of editing the launcher in the image with sed, as the
reference did.
"""

from __future__ import annotations

from cvs_tasks import runtimes
from cvs_tasks.families import GENERIC_NAMES, Family, launcher_family_names, megatron_family, precision_env
from cvs_tasks.jobs import layout
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
from cvs_tasks.jobs.spec import JobSetupError, JobSpec, LaunchPlan, NodeLaunch
from cvs_tasks.jobs.tokenizer import needs_local_tokenizer, tokenizer_file

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
