"""Rules a JSON schema cannot say: env names the suite owns, model sizes and backends, old file formats.

Each check takes plain (placeholder-resolved) JSON and returns problems, so all of them run even
when the pydantic model rejects some other block.
"""

from __future__ import annotations

import re
from typing import Any

from cvs_tasks import backends, runtimes
from cvs_tasks.config.errors import ConfigError, Problem, join_path
from cvs_tasks.config.placeholders import CHANGEME
from cvs_tasks.config.sweep import Combo
from cvs_tasks.families import megatron_family, model_size_of, size_problem
from cvs_tasks.identifiers import identifier_problem, looks_like_secret_env

ENV_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")
SUITE_OWNED_ENV = {
    "NNODES": "the suite sets NNODES from the number of hosts in the cluster file; remove it",
    "NODE_RANK": "the suite sets NODE_RANK per node (host i gets i); remove it",
}
SECRET_ENV = {
    "HF_TOKEN": "never put the token in the config; the suite reads it from paths.hf_token_file",
    "HUGGING_FACE_HUB_TOKEN": "never put the token in the config; the suite reads it from paths.hf_token_file",
}
SK_KEYS = ("schema_version", "framework", "config", "model_params")
SK_MOVES = {
    "schema_version": "old SK-style config (skalla/megatron branch): this harness reads the current schema; "
                      "start from a packaged template (invoke config.list / config.copy) and move your values",
    "framework": "gone: single vs distributed comes from the cluster's host count; delete it",
    "gpu_arch": "now gpu_name (MI300X, MI325X or MI355X)",
    "config": "split up: hf_token_file, log_dir, scripts_dir, data_cache_dir, rocm_dir -> paths.*; "
              "training_iterations -> train_params.training_iterations; nccl_socket_ifname, gloo_socket_ifname, "
              "nccl_ib_hca, nccl_ib_gid_index, nccl_debug, master_address -> container.env as NCCL_SOCKET_IFNAME, "
              "GLOO_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_IB_GID_INDEX, NCCL_DEBUG, MASTER_ADDR (string values); "
              "nnodes -> delete (set from the cluster's host count)",
    "model_params": "now train_params (model_name, tokenizer_model, model_size, sequence_length, "
                    "tensor_parallelism, pipeline_parallelism, micro_batch_size, global_batch_size, precision)",
    "sweep": "combination keys are now MBS=<m>,GBS=<g>,PRECISION=<p> with train_params overlays as the body",
}


def reject_old_formats(raw: dict[str, Any], path) -> None:
    """Raise a ConfigError pointing to the new fields if `raw` is an SK-style or legacy per-model config."""
    legacy_models = raw.get("model_params")
    legacy_config = raw.get("config")
    if (isinstance(legacy_models, dict) and {"single_node", "multi_node"} & set(legacy_models)) or (
        isinstance(legacy_config, dict) and "container_image" in legacy_config
    ):
        raise ConfigError(path, [("", "legacy per-model suite config (mi3xx_megatron_llama_*.json / "
                                  "mi35x_megatron_llama_single.json, nested model_params.<node>.<model>.<gpu>); "
                                  "it cannot be used with these suites. Copy a current template instead, e.g. "
                                  "invoke config.copy mi3xx_megatron_llama-3.1-8b_single.json --output site.json "
                                  "--with-thresholds, and carry over image, NIC and path values")])
    present = [key for key in SK_KEYS if key in raw]
    if not present:
        return
    problems: list[Problem] = [("", SK_MOVES["schema_version"])]
    problems += [(key, SK_MOVES[key]) for key in ("framework", "gpu_arch", "config", "model_params", "sweep")
                 if key in raw and key != "schema_version"]
    raise ConfigError(path, problems)


def env_problems(config: dict[str, Any]) -> tuple[list[Problem], list[str]]:
    """container.env: real env names, no suite-owned or secret keys. (String values: the model checks.)"""
    container = config.get("container")
    env = container.get("env") if isinstance(container, dict) else None
    problems: list[Problem] = []
    warnings: list[str] = []
    if isinstance(container, dict):
        args = (container.get("runtime") or {}).get("args") if isinstance(container.get("runtime"), dict) else None
        if isinstance(args, dict) and "env" in args:
            problems.append(("container.runtime.args.env", "environment goes in container.env (a dict of strings)"))
    if not isinstance(env, dict):
        return problems, warnings
    for key in env:
        where = join_path("container.env", key)
        if key in SUITE_OWNED_ENV:
            problems.append((where, SUITE_OWNED_ENV[key]))
        elif key in SECRET_ENV:
            problems.append((where, SECRET_ENV[key]))
        elif not ENV_NAME.match(key):
            problems.append((where, "not a valid environment variable name (letters, digits, _; no leading digit)"))
        elif looks_like_secret_env(key):
            problems.append((where, "looks like a secret: container.env values go on the docker command line "
                             "and into `docker inspect` on every node; pass it as a file instead "
                             "(paths.hf_token_file for the HF token)"))
    return problems, warnings


def container_problems(config: dict[str, Any]) -> list[Problem]:
    """A docker container needs a name; container name and image are identifiers."""
    container = config.get("container") if isinstance(config.get("container"), dict) else {}
    problems: list[Problem] = []
    runtime = container.get("runtime") if isinstance(container.get("runtime"), dict) else {}
    named = runtimes.find(str(runtime.get("name")))  # an unknown name is the model's to report
    if named is not None and named.node_docker and not str(container.get("name", "")).strip():
        problems.append(("container.name", "required for the docker runtime (the container's name on every node)"))
    for key, kind in (("name", "container name"), ("image", "image")):
        value = container.get(key)
        if isinstance(value, str) and value and CHANGEME not in value:
            problem = identifier_problem(kind, value)
            if problem:
                problems.append((f"container.{key}", problem))
    return problems


def family_problems(config: dict[str, Any], combos: list[Combo]) -> list[Problem]:
    """What the family rows (``cvs_tasks.families``) say about the model: a ``model_size`` given for
    a combo must be a size of its tokenizer's family, and a size only Primus builds (Llama 3.1 405B)
    needs a Primus image."""
    problems: list[Problem] = []
    params = config.get("train_params") if isinstance(config.get("train_params"), dict) else {}
    model = str(params.get("model_name", ""))
    container = config.get("container") if isinstance(config.get("container"), dict) else {}
    image = container.get("image")
    backend = backends.backend_for_image(image) if isinstance(image, str) and CHANGEME not in image else None
    named = model_size_of(model)
    refused = backend.size_problem(model, named[1]) if backend is not None and named is not None else None
    for combo in combos:
        size = str(combo.train_params.get("model_size", ""))
        tokenizer = str(combo.train_params.get("tokenizer_model", ""))
        family = megatron_family(tokenizer)
        where = _model_size_source(config, combo.cell)
        if where is None or CHANGEME in size + tokenizer or family is None:
            continue  # the default size, a placeholder, or a tokenizer no row knows: nothing to hold it to
        if str(combo.train_params.get("training_script", "")).strip():
            continue  # the user's own launcher: what it takes is unknown
        problem = size_problem(family, size, tokenizer)
        if problem and (where, problem) not in problems:
            problems.append((where, problem))
        found = family.size(size)
        if found is not None and backend is not None and refused is None:
            refused = backend.size_problem(f"model_size {size} of the {family.name} family", found)
    if refused:
        problems.append(("container.image", f"{refused}, got {image!r}"))
    return problems


def _model_size_source(config: dict[str, Any], cell: str) -> str | None:
    """Where a combo's model_size was given (its sweep overlay, else train_params), None: the default."""
    sweep = config.get("sweep") if isinstance(config.get("sweep"), dict) else {}
    combinations = sweep.get("combinations") if isinstance(sweep.get("combinations"), dict) else {}
    overlay = combinations.get(cell)
    if isinstance(overlay, dict) and "model_size" in overlay:
        return join_path(join_path("sweep.combinations", cell), "model_size")
    params = config.get("train_params")
    return "train_params.model_size" if isinstance(params, dict) and "model_size" in params else None


def checkpoint_problems(config: dict[str, Any]) -> list[Problem]:
    """Save/resume step counts that cannot produce a resumable checkpoint."""
    ckpt = config.get("checkpoint")
    if not isinstance(ckpt, dict) or ckpt.get("enforce") is not True:
        return []
    interval, save, resume = (ckpt.get(k, d)
                              for k, d in (("save_interval", 20), ("save_iters", 21), ("resume_iters", 25)))
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (interval, save, resume)):
        return []  # the model reports the types
    problems: list[Problem] = []
    if save < interval:
        problems.append(("checkpoint.save_iters", f"{save} < save_interval {interval}: no checkpoint would be saved"))
    elif save % interval == 0:
        problems.append(("checkpoint.save_iters", f"{save} is a multiple of save_interval {interval}; the final "
                         f"iteration is not saved, so use e.g. {save + 1}"))
    if resume <= save:
        problems.append(("checkpoint.resume_iters", f"{resume} must be greater than save_iters {save} "
                         "so the resume phase trains past the checkpoint"))
    return problems
