"""The model families: everything the project knows about one family is its row in ``FAMILIES``.

A row says which Megatron-LM launcher script the family runs and the env names it reads, what the
script pins and why a run then differs from what was asked (docs/launch_contracts.md#family-table), whether the
launcher needs a local tokenizer file, which Hugging Face organisations gate its tokenizers, and
its sizes: what ``train_params.model_size`` may be, the model names that mean each size and the
FLOPs dimensions (``metrics.flops.MODELS``) each uses. The launch, the launch contracts, the
config checks, the mismatch causes, the tokenizer stage and the FLOPs recomputation ask the row
through the lookups below; none keeps a name or a pattern of its own.

A tokenizer repo id picks the first row whose pattern occurs in it (case-insensitive), so qwen3 is
listed before qwen2 (docs/launch_contracts.md#family-table). A row without a script is a family the project knows
only by its tokenizers (gemma: gated, no Megatron-LM launcher). This module imports nothing from
the project, so every layer can ask it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
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

# Why a parameter the trainer states differs from the asked one, per launcher script ({script}: its
# file name). docs/launch_contracts.md#family-table: which variable a script reads under another name, which it pins,
# which only newer images read.
_LLAMA3_CAUSES = {
    "precision": "{script} in this image does not read TE_FP4 / TE_FP8_RECIPE "
                 "(only the 2026 script does): MXFP4 trains BF16, MXFP8 delayed-scaling FP8",
    "mock_data": "{script} in this image ignores MOCK_DATA (the 2026 script uses mock data "
                 "only when DATA_PATH is unset)",
    "tensor_model_parallel_size": "{script} forces TP=1 when FSDP=1",
    "tokenizer": "{script} in this image overrides TOKENIZER_MODEL",
}
_DEEPSEEK_CAUSES = {
    "world_size": "{script} in this image pins NNODES=1, NODE_RANK=0 and MASTER_ADDR=localhost: "
                  "every node trained alone",
    "nnodes": "{script} in this image pins NNODES=1: every node trained alone",
    "seq_length": "{script} in this image reads SEQ_LEN, not SEQ_LENGTH (default 2048)",
    "recompute": "{script} in this image reads AC (default sel: selective recompute), not RECOMPUTE",
    "train_iters": "{script} in this image pins --exit-interval 50",
    "tensor_model_parallel_size": "{script} in this image pins TP=1",
    "pipeline_model_parallel_size": "{script} in this image pins PP=1",
    "micro_batch_size": "{script} in this image pins MBS (the Feb 2025 script pins the whole run)",
    "global_batch_size": "{script} in this image pins GBS (the Feb 2025 script pins the whole run)",
    "tokenizer": "{script} in this image pins TOKENIZER_MODEL=deepseek-ai/DeepSeek-V2-Lite",
}


@dataclass(frozen=True)
class ModelSize:
    """One size of a family: the ``model_size`` value, the model names that mean it, its FLOPs dims."""

    size: str  # train_params.model_size, the launcher's MODEL_SIZE (a trailing B is ignored when compared)
    dims: str | None = None  # key of metrics.flops.MODELS; None: the FLOPs come from the arguments dump only
    names: tuple[str, ...] = ()  # model_name spellings (lower case, no -pretrain suffix) that mean this size
    megatron: bool = True  # False: only Primus builds it, the Megatron-LM launcher does not


@dataclass(frozen=True)
class Family:
    """One row of the family table (see the module docstring)."""

    name: str
    pattern: str  # occurs in the tokenizer repo id (case-insensitive)
    script: str = ""  # the Megatron-LM launcher, relative to megatron_root; "": none known
    precision_env: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
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
    pinned_size: str = ""  # the script pins MODEL_SIZE to this: the model_size given is ignored, not checked
    precision_needs: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # see _LLAMA_PRECISION_NEEDS
    data_cache_var: str = ""  # the env name the dataset index cache folder goes by (older scripts ignore it)
    rdma_links: int | None = None  # the script indexes this many RDMA links and exits before torchrun with fewer
    causes: Mapping[str, str] = field(default_factory=dict)  # compared parameter -> why it differs ({script})
    tokenizer_file: str = ""  # a file the launcher needs on the node (downloaded first); "": takes the repo id
    gated: tuple[str, ...] = ()  # HF repo-id prefixes (lower case) of its tokenizers that need a granted token
    sizes: tuple[ModelSize, ...] = ()  # (): any model_size is taken, no FLOPs dims by name

    def probed_names(self) -> tuple[str, ...]:
        """The env names whose reading differs between versions of the script: what a probe asks."""
        names = [name for name, _ in self.precision_needs.values()]
        return tuple(dict.fromkeys(names + ([self.data_cache_var] if self.data_cache_var else [])))

    def size(self, model_size: str) -> ModelSize | None:
        """The row's size for a ``model_size`` value (``70`` and ``70B`` alike), or None."""
        key = _size_key(model_size)
        return next((s for s in self.sizes if _size_key(s.size) == key), None)


# Env names for a launcher given by train_params.training_script with no family match.
GENERIC_NAMES = Family("generic", "")

FAMILIES: tuple[Family, ...] = (
    Family("llama-3", r"llama-?3", "examples/llama/train_llama3.sh", _LLAMA_PRECISION,
           gbs_var="BS", precision_needs=_LLAMA_PRECISION_NEEDS, data_cache_var="DATA_CACHE_PATH",
           causes=_LLAMA3_CAUSES, gated=("meta-llama/",), sizes=(
               ModelSize("8", "llama3.1_8b", ("llama3.1_8b", "llama3_8b", "llama-3.1-8b", "8b")),
               ModelSize("70", "llama3.1_70b", ("llama3.1_70b", "llama3_70b", "llama3.3_70b", "llama-3.1-70b",
                                                "llama-3.3-70b", "70b")),
               # config.rules: the 405B model runs only on Primus
               ModelSize("405", "llama3.1_405b", ("llama3.1_405b", "llama3_405b", "llama-3.1-405b", "405b"),
                         megatron=False),
           )),
    Family("llama-2", r"llama-?2", "examples/llama/train_llama2.sh", _LLAMA_PRECISION,
           gbs_var="BS", precision_needs=_LLAMA_PRECISION_NEEDS, data_cache_var="DATA_CACHE_PATH",
           gated=("meta-llama/",)),
    # docs/launch_contracts.md#deepseek-launcher: reads SEQ_LEN / PAD_LEN and AC (sel|full|none), pins one
    # node, MODEL_SIZE=16B and --exit-interval 50; under `set -e` it exits before torchrun on a node with
    # fewer than 8 RDMA links; pins TOKENIZER_MODEL=deepseek-ai/DeepSeek-V2-Lite and loads tokenizer.json
    # through the hub
    Family("deepseek", r"deepseek", "examples/deepseek_v2/train_deepseekv2.sh",
           _PR_PRECISION, iters_var="TRAIN_ITERS", seq_var="SEQ_LEN", pad_var="PAD_LEN",
           recompute_var="AC", recompute_values=("none", "full"), pins_one_node=True,
           exit_interval=50, pinned_size="16B", rdma_links=8, causes=_DEEPSEEK_CAUSES, sizes=(
               ModelSize("16", "deepseek_v2_lite", ("deepseek_v2_lite", "deepseek-v2-lite")),
           )),
    Family("mixtral", r"mixtral", "examples/mixtral/train_mixtral_moe.sh", _PR_PRECISION,
           tp_var="TP_SIZE", pp_var="PP_SIZE", seq_var="SEQLEN", iters_var="TRAIN_ITERS",
           tokenizer_file="tokenizer.model", gated=("mistralai/",)),
    Family("qwen3", r"qwen-?3", "examples/qwen3/train_qwen3.sh", _QWEN3_PRECISION,
           mbs_var="MICRO_BATCH_SIZE", gbs_var="GLOBAL_BATCH_SIZE",
           iters_var="TRAIN_ITERS"),
    Family("qwen2", r"qwen-?2", "examples/qwen2/train_qwen2.sh", _QWEN2_PRECISION,
           gbs_var="BS"),
    Family("gemma", r"gemma", gated=("google/gemma",)),
)


def megatron_family(tokenizer_model: str) -> Family | None:
    """The first family with a Megatron-LM launcher whose pattern occurs in the tokenizer repo id, or None."""
    for family in FAMILIES:
        if family.script and re.search(family.pattern, tokenizer_model, re.IGNORECASE):
            return family
    return None


def family_named(name: str) -> Family | None:
    """The row called ``name`` (a launcher name such as ``primus`` or ``generic`` is none)."""
    return next((family for family in FAMILIES if family.name == name), None)


def launcher_family_names() -> str:
    """``llama-3, llama-2, ...``: the families a Megatron-LM launcher is known for, for messages."""
    return ", ".join(family.name for family in FAMILIES if family.script)


def family_cause(name: str, param: str) -> str | None:
    """Why ``param`` differs when family ``name``'s script ran ({script} left to fill), or None."""
    family = family_named(name)
    return family.causes.get(param) if family else None


def model_size_of(model_name: str | None) -> tuple[Family, ModelSize] | None:
    """The family and size a model name means (``llama3.1_8B``, ``Llama-3.3-70B``, ``70B``,
    ``deepseek_v2_lite-pretrain``), or None when no row lists it."""
    if not model_name:
        return None
    key = model_name.strip().lower().replace(" ", "")
    for suffix in ("-pretrain", "_pretrain"):
        key = key.removesuffix(suffix)
    for family in FAMILIES:
        for size in family.sizes:
            if key in size.names:
                return family, size
    return _named_inside(key)


def _named_inside(key: str) -> tuple[Family, ModelSize] | None:
    """A listed name inside a longer model name (``llama-3.1-405b-instruct``, ``my-405b``): the longest
    one standing as its own word, unless the name also names another family (``qwen3-8b`` is no Llama)."""
    found = [(len(name), family, size) for family in FAMILIES for size in family.sizes for name in size.names
             if re.search(rf"(?<![a-z0-9.]){re.escape(name)}(?![a-z0-9])", key)]
    if not found:
        return None
    _, family, size = max(found, key=lambda f: f[0])
    others = [f for f in FAMILIES if f is not family and f.pattern and re.search(f.pattern, key)]
    return None if others else (family, size)


def dims_key(model_name: str | None) -> str | None:
    """The ``metrics.flops.MODELS`` key of a model name's FLOPs dimensions, or None."""
    found = model_size_of(model_name)
    return found[1].dims if found else None


def gated_prefixes() -> tuple[str, ...]:
    """Every HF repo-id prefix some family declares gated: an organisation gates all its repos."""
    return tuple(dict.fromkeys(prefix.lower() for family in FAMILIES for prefix in family.gated))


def size_problem(family: Family, model_size: str, tokenizer_model: str) -> str | None:
    """Why ``model_size`` is not a size of ``family`` (None when it is, or the row takes or ignores any)."""
    if not family.sizes or family.pinned_size or family.size(model_size) is not None:
        return None
    known = ", ".join(size.size for size in family.sizes)
    return (f"{model_size!r} is not a size of the {family.name} family (the family of {tokenizer_model}): "
            f"use one of {known}")


def normalise_precision(precision: str) -> str:
    """``fp8``/``TE_FP8`` -> ``FP8``: the tables are keyed on the sweep-key spelling."""
    return precision.strip().upper().removeprefix("TE_")


def precision_env(family: Family | None,
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


def _size_key(size: str) -> str:
    return size.strip().upper().removesuffix("B")
