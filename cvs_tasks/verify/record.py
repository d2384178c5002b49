"""The effective configuration as a stage record stores it, and back (the report reads this)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cvs_tasks.verify.compare import ConfigCheck
from cvs_tasks.verify.effective import EffectiveConfig

KEY = "effective_config"
MISMATCHES = "config_mismatches"
WARNINGS = "config_warnings"


def effective_record(check: ConfigCheck | None, warnings: list[str] | None = None) -> dict[str, Any]:
    """`record.data` entries: the effective config (None: no dump), every mismatch, any warning."""
    data: dict[str, Any] = {KEY: check.effective.to_dict() if check and check.effective else None,
                            MISMATCHES: [m.to_dict() for m in check.mismatches] if check else []}
    if warnings:
        data[WARNINGS] = list(warnings)
    return data


def effective_of(data: Mapping[str, Any]) -> EffectiveConfig | None:
    """The EffectiveConfig a record holds, or None (no dump, an older record, a damaged file)."""
    stored = data.get(KEY)
    return EffectiveConfig.from_dict(stored) if isinstance(stored, dict) else None


def mismatches_of(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    stored = data.get(MISMATCHES)
    return ([m for m in stored if isinstance(m, dict) and isinstance(m.get("param"), str)]
            if isinstance(stored, list) else [])


def effective_facts(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Report rows: what the trainer ran (one line) and whether it matched the plan."""
    if KEY not in data:
        return []  # a record from before the check existed, or a stage that never ran a job
    effective = effective_of(data)
    if effective is None:
        return [("Trainer ran", "not stated: no arguments dump in the log (not checked)")]
    mismatches = mismatches_of(data)
    check = ("as asked" if not mismatches else
             "; ".join(f"{m['param']} {m.get('actual')} != {m.get('asked')} ({m.get('cause', '')})"
                       for m in mismatches))
    return [("Trainer ran", describe(effective)), ("Config check", check)]


def describe(e: EffectiveConfig) -> str:
    """`16 GPUs (2 nodes), MBS 4, GBS 128, seq 8192, 20 iters, TP 1, PP 1, FP8 (delayed), ...`."""
    parts = []
    if e.world_size is not None:
        parts.append(f"{e.world_size} GPUs" + (f" ({e.nnodes} node{'s' if e.nnodes != 1 else ''})" if e.nnodes else ""))
    for label, value in (("MBS", e.micro_batch_size), ("GBS", e.global_batch_size), ("seq", e.seq_length),
                         ("iters", e.train_iters), ("exit interval", e.exit_interval),
                         ("TP", e.tensor_model_parallel_size), ("PP", e.pipeline_model_parallel_size),
                         ("CP", e.context_parallel_size), ("EP", e.expert_model_parallel_size)):
        if value is not None:
            parts.append(f"{label} {value}")
    if e.precision:
        parts.append(e.precision + (f" ({e.fp8_recipe})" if e.fp8_recipe else ""))
    if e.recompute is not None:
        parts.append(f"recompute {e.recompute}")
    if e.fsdp is not None:
        parts.append(f"FSDP {'on' if e.fsdp else 'off'}")
    if e.mock_data is not None:
        parts.append("mock data" if e.mock_data else "real data")
    if e.tokenizer:
        parts.append(f"tokenizer {e.tokenizer}")
    return ", ".join(parts)
