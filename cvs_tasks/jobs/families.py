"""Megatron-LM model families: which launcher script, env names and precision env each one takes,
and what the script pins (its launch contract, docs/launch_contracts.md#family-table).

The first family whose pattern matches ``tokenizer_model`` (case-insensitive) wins, so qwen3 is
listed before qwen2 (docs/launch_contracts.md#family-table).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# The env the ROCm launcher scripts read for a precision none of the tables know.
FALLBACK_PRECISION_ENV: tuple[tuple[str, str], ...] = (("TE_FP8", "1"),)

_LLAMA_PRECISION = {
    "FP8": (("TE_FP8", "1"),),
    "BF16": (("TE_FP8", "0"), ("TE_FP4", "0")),
    "MXFP4": (("TE_FP4", "1"), ("TE_FP4_RECIPE", "mxfp4")),
    "MXFP8": (("TE_FP8", "1"), ("TE_FP8_RECIPE", "mxfp8")),
}
# docs/launch_contracts.md#llama-launcher: only the 2026 train_llama3.sh reads TE_FP4 and TE_FP8_RECIPE; an older one
# trains MXFP4 as BF16 and MXFP8 as delayed-scaling FP8, silently. precision -> (the env name the
# script must read for that precision to train, what a script that does not read it trains instead).
_LLAMA_PRECISION_NEEDS = {
    "MXFP4": ("TE_FP4", "BF16"),
    "MXFP8": ("TE_FP8_RECIPE", "plain (delayed-scaling) FP8"),
}
_PR_PRECISION = {
    "FP8": (("PR", "fp8"),),
    "FP16": (("PR", "fp16"),),
    "BF16": (("PR", "bf16"),),
}
_QWEN3_PRECISION = {
    "FP8": (("PR", "fp8"),),
    "BF16": (("PR", "bf16"),),
    "MXFP8": (("PR", "fp8"), ("FP8_RECIPE", "mxfp8")),
}
_QWEN2_PRECISION = {
    "FP8": (("TE_FP8", "1"),),
    "BF16": (("TE_FP8", "0"),),
}


@dataclass(frozen=True)
class MegatronFamily:
    """One row of the family table: script and the env-variable names it reads."""

    name: str
    pattern: str
    script: str  # relative to megatron_root
    precision_env: dict[str, tuple[tuple[str, str], ...]]
    mbs_var: str = "MBS"
    gbs_var: str = "GBS"
    tp_var: str = "TP"
    pp_var: str = "PP"
    seq_var: str = "SEQ_LENGTH"
    iters_var: str = "TOTAL_ITERS"
    recompute_var: str = "RECOMPUTE"
    recompute_values: tuple[str, str] = ("0", "1")  # what the script takes for off / on
    pad_var: str = ""  # a padded length the script reads next to the sequence length
    pins_one_node: bool = False  # the script pins NNODES=1, NODE_RANK=0, MASTER_ADDR=localhost
    exit_interval: int | None = None  # the script passes --exit-interval N: no run goes past step N
    precision_needs: dict[str, tuple[str, str]] = field(default_factory=dict)  # see _LLAMA_PRECISION_NEEDS
    data_cache_var: str = ""  # the env name the dataset index cache folder goes by (older scripts ignore it)
    rdma_links: int | None = None  # the script indexes this many RDMA links and exits before torchrun with fewer

    def probed_names(self) -> tuple[str, ...]:
        """The env names whose reading differs between versions of the script: what a probe asks."""
        names = [name for name, _ in self.precision_needs.values()]
        return tuple(dict.fromkeys(names + ([self.data_cache_var] if self.data_cache_var else [])))


# Env names for a launcher given by train_params.training_script with no family match.
GENERIC_NAMES = MegatronFamily("generic", "", "", {})

FAMILIES: tuple[MegatronFamily, ...] = (
    MegatronFamily("llama-3", r"llama-?3", "examples/llama/train_llama3.sh", _LLAMA_PRECISION,
                   gbs_var="BS", precision_needs=_LLAMA_PRECISION_NEEDS, data_cache_var="DATA_CACHE_PATH"),
    MegatronFamily("llama-2", r"llama-?2", "examples/llama/train_llama2.sh", _LLAMA_PRECISION,
                   gbs_var="BS", precision_needs=_LLAMA_PRECISION_NEEDS, data_cache_var="DATA_CACHE_PATH"),
    # docs/launch_contracts.md#deepseek-launcher: reads SEQ_LEN / PAD_LEN and AC (sel|full|none), pins one node
    # and --exit-interval 50; under `set -e` it exits before torchrun on a node with fewer than 8 RDMA links
    MegatronFamily("deepseek", r"deepseek", "examples/deepseek_v2/train_deepseekv2.sh",
                   _PR_PRECISION, iters_var="TRAIN_ITERS", seq_var="SEQ_LEN", pad_var="PAD_LEN",
                   recompute_var="AC", recompute_values=("none", "full"), pins_one_node=True,
                   exit_interval=50, rdma_links=8),
    MegatronFamily("mixtral", r"mixtral", "examples/mixtral/train_mixtral_moe.sh", _PR_PRECISION,
                   tp_var="TP_SIZE", pp_var="PP_SIZE", seq_var="SEQLEN", iters_var="TRAIN_ITERS"),
    MegatronFamily("qwen3", r"qwen-?3", "examples/qwen3/train_qwen3.sh", _QWEN3_PRECISION,
                   mbs_var="MICRO_BATCH_SIZE", gbs_var="GLOBAL_BATCH_SIZE",
                   iters_var="TRAIN_ITERS"),
    MegatronFamily("qwen2", r"qwen-?2", "examples/qwen2/train_qwen2.sh", _QWEN2_PRECISION,
                   gbs_var="BS"),
)


def megatron_family(tokenizer_model: str) -> MegatronFamily | None:
    """The first family whose pattern occurs in the tokenizer repo id, or None."""
    for family in FAMILIES:
        if re.search(family.pattern, tokenizer_model, re.IGNORECASE):
            return family
    return None


def normalise_precision(precision: str) -> str:
    """``fp8``/``TE_FP8`` -> ``FP8``: the tables are keyed on the sweep-key spelling."""
    return precision.strip().upper().removeprefix("TE_")


def precision_env(family: MegatronFamily | None,
                  precision: str) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """The precision env pairs for a family, and a warning when falling back to ``TE_FP8=1``."""
    key = normalise_precision(precision)
    if family is None:
        return FALLBACK_PRECISION_ENV, (
            f"precision {precision!r}: no Megatron-LM model family known, using TE_FP8=1"
        )
    pairs = family.precision_env.get(key)
    if pairs is None:
        known = ", ".join(family.precision_env)
        return FALLBACK_PRECISION_ENV, (
            f"precision {precision!r} is not known for the {family.name} family "
            f"(known: {known}); using TE_FP8=1"
        )
    return pairs, None
