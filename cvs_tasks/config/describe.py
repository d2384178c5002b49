"""What a loaded suite will do on a given cluster (single or distributed, backend, hosts, combos),
shown without its secrets.

Used by `config.validate`, `config.show` and the run manifest. `local_file_warnings` is the one
function here that looks at the disk (the head node's view), and it only warns: node-side facts
are checked on the nodes at run time. `redact` makes the secret-free copy of a config every one of
them shows (the manifest, the report, `config.show`).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from cvs_tasks import backends, runtimes
from cvs_tasks.config.cluster import Cluster
from cvs_tasks.config.container_defaults import describe_defaults
from cvs_tasks.config.load import Suite

SuiteKind = Literal["single", "distributed"]


def guess_suite_kind(config_path: Path, host_count: int | None) -> tuple[SuiteKind, list[str]]:
    """The host count decides when known (>1 is distributed); otherwise the config's name does."""
    stem = config_path.stem.lower()
    named: SuiteKind | None = "distributed" if "_distributed" in stem else "single" if "_single" in stem else None
    if host_count is None:
        return named or "single", []
    kind: SuiteKind = "distributed" if host_count > 1 else "single"
    warnings = []
    if named and named != kind:
        warnings.append(f"the config is named for a {named} run but the cluster has {host_count} "
                        f"host(s); running it as {kind}")
    return kind, warnings


def distributed_warnings(suite: Suite, kind: SuiteKind) -> list[str]:
    """Settings a multi-node run needs that a single-node config can leave out."""
    if kind != "distributed":
        return []
    notes = []  # MASTER_ADDR, the interfaces and NCCL_IB_HCA are refused before a run (config.readiness)
    if suite.config.checkpoint.enforce and not suite.config.checkpoint.checkpoint_dir:
        notes.append("checkpoint.checkpoint_dir must be set (shared storage) for a distributed checkpoint test")
    return notes


def local_file_warnings(suite: Suite) -> list[str]:
    """Files the head node reads that are missing here (only warnings: they may exist on the nodes)."""
    token = Path(suite.config.paths.hf_token_file).expanduser()
    if not token.is_file():
        return [f"paths.hf_token_file {token} does not exist here; the tokenizer download will be skipped or fail"]
    return []


def effective_config(suite: Suite) -> dict[str, Any]:
    """The config after placeholders and defaults, secrets redacted (for the manifest and `config.show`)."""
    return redact(suite.config.model_dump(mode="json"))


def shown_config(suite: Suite) -> dict[str, Any]:
    """`config.show`: the effective config, plus (docker runtime: the node's docker runs it) each container default with
    its reason and whether the config already has it, overrides it, omits it or gets it added
    (a `_` key: the output still loads as a config)."""
    shown = effective_config(suite)
    runtime = suite.config.container.runtime
    if runtimes.get(runtime.name).node_docker:
        shown["_container_defaults"] = describe_defaults(runtime.args.model_dump(mode="json"))
    return shown


def describe_suite(suite: Suite, cluster: Cluster | None = None, *, check_local_files: bool = True) -> dict[str, Any]:
    """A JSON-able summary of what the suite will run, with every warning gathered."""
    kind, kind_warnings = guess_suite_kind(suite.config_path, len(cluster.hosts) if cluster else None)
    warnings = list(suite.warnings) + kind_warnings + distributed_warnings(suite, kind)
    if check_local_files:
        warnings += local_file_warnings(suite)
    return {
        "config_file": str(suite.config_path),
        "threshold_file": str(suite.threshold_path) if suite.threshold_path else None,
        "suite": kind,
        "backend": backends.get(suite.backend).label,
        "gpu_name": suite.config.gpu_name,
        "gpus_per_node": suite.config.gpus_per_node,
        "image": suite.config.container.image,
        "model_name": suite.config.train_params.get("model_name"),
        "enforce_thresholds": suite.config.enforce_thresholds,
        "hosts": [{"name": h.name, "address": h.address, "port": h.port, "local": h.local}
                  for h in cluster.hosts] if cluster else [],
        "combos": [{"id": c.id, "cell": c.cell, "has_thresholds": c.cell in suite.thresholds,
                    "train_params": c.train_params} for c in suite.combos],
        "files_hash": suite.files_hash,
        "warnings": warnings,
    }


# --- the secret-free copy -------------------------------------------------------------------------
MASK = "***"
_SECRET_WORDS = {"password", "passwd", "pwd", "secret", "token", "apikey", "credential", "credentials", "auth"}
_PATH_SUFFIXES = ("_file", "_path", "_dir", "_files")
_TOKEN_IN_TEXT = re.compile(r"\bhf_[A-Za-z0-9]{20,}\b")


def looks_secret(key: str) -> bool:
    """`HF_TOKEN`, `password`, `api_key`: yes. `hf_token_file`, `tokenizer_model`: no (a path, a model id)."""
    lowered = key.lower()
    if lowered.endswith(_PATH_SUFFIXES):
        return False
    words = [w for w in re.split(r"[_\-.\s]+|(?<=[a-z])(?=[A-Z])", key) if w]
    words = [w.lower() for w in words]
    joined = {a + b for a, b in zip(words, words[1:])}
    return bool(_SECRET_WORDS & (set(words) | joined))


def redact(obj: Any) -> Any:
    """A deep copy with secret values replaced by `***` (pydantic models are dumped to JSON data first)."""
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json")
    return _redact(copy.deepcopy(obj))


def _redact(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {key: (MASK if looks_secret(str(key)) and value not in (None, "") else _redact(value))
                for key, value in obj.items()}
    if isinstance(obj, list):
        return [_redact(value) for value in obj]
    if isinstance(obj, tuple):
        return tuple(_redact(value) for value in obj)
    if isinstance(obj, str):
        return _TOKEN_IN_TEXT.sub(MASK, obj)
    return obj
