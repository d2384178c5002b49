"""Megatron-LM entry point: each ROCm example script's launch contract, as strict as the real one.

A stand-in more obliging than the real launcher hides the harness's mistakes, so each family reads
exactly the env names its real script reads, pins what it pins and ignores the rest
(docs/launch_contracts.md#family-table). Summary (env the script reads; pinned values):

| family   | MBS / GBS                             | TP / PP / seq           | iterations  | precision         | pins |
|----------|---------------------------------------|-------------------------|-------------|-------------------|------|
| llama3/2 | MBS / BS                              | TP / PP / SEQ_LENGTH    | TOTAL_ITERS | TE_FP8, TE_FP4,   | - |
|          |                                       |                         |             | TE_FP8_RECIPE     |   |
| qwen2    | MBS / BS                              | TP / PP / SEQ_LENGTH    | TOTAL_ITERS | TE_FP8            | - |
| deepseek | MBS / GBS                             | (pinned) / SEQ_LEN=2048 | TRAIN_ITERS | PR                | (*) |
| mixtral  | MBS / GBS                             | TP_SIZE / PP_SIZE / SEQLEN | TRAIN_ITERS | PR             | - |
| qwen3    | MICRO_BATCH_SIZE / GLOBAL_BATCH_SIZE  | TP / PP / SEQ_LENGTH    | TRAIN_ITERS | PR (+FP8_RECIPE)  | - |

(*) deepseek pins NNODES=1, NODE_RANK=0, MASTER_ADDR=localhost, random port, TP=PP=1, MODEL_SIZE=16B, tokenizer,
--exit-interval 50; AC (default sel) not RECOMPUTE.

Older script versions read fewer names: a stand-in script exports ``SIM_SCRIPT_VERSION`` and the
names that version ignores (``IGNORED_BY_VERSION``) are dropped before the contract is read, so
the Feb-2025 train_llama3.sh stand-in trains MXFP8 as FP8 and MXFP4 as BF16, as the real one does.

Megatron's own start-up assertions are kept: TP x PP must divide the world size, and GBS must be a
multiple of MBS x DP; an unknown MODEL_SIZE stops the script before torchrun.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

from .engine import Engine, install_signal_handlers
from .models import MODEL_SIZES, model_for
from .output import Output
from .spec import JobSpec, apply_common_env, env_int
from .voices import MegatronVoice

FAMILIES = ("llama3", "llama2", "deepseek", "mixtral", "qwen3", "qwen2")
DEFAULT_BATCH = (2, 128)
EXIT_BAD_SIZE = 1


@dataclass(frozen=True)
class Contract:
    """What one example script reads (env names), pins (env values it overwrites) and defaults."""

    mbs: str = "MBS"
    gbs: str = "BS"
    tp: str = "TP"
    pp: str = "PP"
    seq: str = "SEQ_LENGTH"
    seq_default: int | None = None  # None: the model's own length
    iters: str = "TOTAL_ITERS"
    precision: str = "te"  # te: TE_FP8/TE_FP4/TE_FP8_RECIPE; pr: PR (+FP8_RECIPE)
    recompute: str = "RECOMPUTE"  # RECOMPUTE=1 -> full; AC=sel|full|none
    recompute_default: str = "0"
    pins: dict[str, str] = field(default_factory=dict)
    exit_interval: int | None = None
    honours_mock_data: bool = True
    honours_fsdp: bool = True


CONTRACTS: dict[str, Contract] = {
    "llama3": Contract(),
    "llama2": Contract(),
    "qwen2": Contract(),
    "deepseek": Contract(gbs="GBS", tp="", pp="", seq="SEQ_LEN", seq_default=2048, iters="TRAIN_ITERS",
                         precision="pr", recompute="AC", recompute_default="sel",
                         pins={"NNODES": "1", "NODE_RANK": "0", "MASTER_ADDR": "localhost", "MODEL_SIZE": "16B",
                               "TOKENIZER_MODEL": "deepseek-ai/DeepSeek-V2-Lite"},
                         exit_interval=50, honours_fsdp=False),
    "mixtral": Contract(gbs="GBS", tp="TP_SIZE", pp="PP_SIZE", seq="SEQLEN", iters="TRAIN_ITERS", precision="pr"),
    "qwen3": Contract(mbs="MICRO_BATCH_SIZE", gbs="GLOBAL_BATCH_SIZE", iters="TRAIN_ITERS", precision="pr"),
}


def precision_from_env(family: str, env: dict) -> str:
    if CONTRACTS[family].precision == "pr":
        pr = (env.get("PR") or "bf16").lower()
        if pr == "fp8":
            return "MXFP8" if family == "qwen3" and env.get("FP8_RECIPE") == "mxfp8" else "FP8"
        return pr.upper()
    if family == "llama3" and env.get("TE_FP4") == "1":
        return "MXFP4"
    if env.get("TE_FP8", "0") == "1":
        return "MXFP8" if family == "llama3" and env.get("TE_FP8_RECIPE") == "mxfp8" else "FP8"
    return "BF16"


def recompute_from_env(contract: Contract, env: dict) -> str | None:
    """Megatron's recompute_granularity: None, `full` or `selective`."""
    value = (env.get(contract.recompute) or contract.recompute_default).lower()
    if contract.recompute == "AC":
        return {"sel": "selective", "full": "full"}.get(value)
    return "full" if value == "1" else None


# docs/launch_contracts.md#llama-launcher: the Feb-2025 train_llama3.sh reads no MXFP names and no DATA_CACHE_PATH.
IGNORED_BY_VERSION: dict[str, tuple[str, ...]] = {
    "2025.02": ("TE_FP4", "TE_FP4_RECIPE", "TE_FP8_RECIPE", "DATA_CACHE_PATH"),
}


def pinned_env(family: str, env: dict | None = None) -> dict:
    """The env as the script sees it after its own assignments (pins win over what the caller set;
    what the script version does not read is gone)."""
    env = dict(os.environ if env is None else env)
    for name in IGNORED_BY_VERSION.get(env.get("SIM_SCRIPT_VERSION", ""), ()):
        env.pop(name, None)
    contract = CONTRACTS[family]
    env.update(contract.pins)
    if "NNODES" in contract.pins:
        env["MASTER_PORT"] = str(random.randint(20000, 59999))
    return env


def spec_from_env(family: str, env: dict | None = None) -> JobSpec:
    if family not in FAMILIES:
        raise SystemExit(f"unknown model family {family!r} (known: {', '.join(FAMILIES)})")
    env = pinned_env(family, env)
    contract = CONTRACTS[family]
    size = (env.get("MODEL_SIZE") or "").strip()
    if size and size not in MODEL_SIZES.get(family, (size,)):
        raise SystemExit(f"Model size not supported: MODEL_SIZE={size} "
                         f"(this script knows {', '.join(MODEL_SIZES[family])})")
    model = model_for(family, size)
    spec = JobSpec(backend="megatron", model=model,
                   micro_batch=env_int(env, contract.mbs, DEFAULT_BATCH[0]),
                   global_batch=env_int(env, contract.gbs, DEFAULT_BATCH[1]),
                   train_iters=env_int(env, contract.iters, 10),
                   seq=env_int(env, contract.seq, contract.seq_default or model.seq),
                   tp=env_int(env, contract.tp, 1) if contract.tp else 1,
                   pp=env_int(env, contract.pp, 1) if contract.pp else 1,
                   precision=precision_from_env(family, env), master_port=6000,
                   dialect="upstream" if env.get("SIM_LOG_DIALECT") == "upstream" else "rocm")
    fsdp = contract.honours_fsdp and env.get("FSDP") == "1"
    spec.exit_interval = contract.exit_interval
    spec.extra_args = {"recompute_granularity": recompute_from_env(contract, env),
                       "use_torch_fsdp2": fsdp,
                       "tokenizer_model": env.get("TOKENIZER_MODEL") or None,
                       "data_cache_path": env.get("DATA_CACHE_PATH") or None,
                       "mock_data": env.get("MOCK_DATA", "1") == "1" if contract.honours_mock_data else True,
                       "exit_interval": contract.exit_interval}
    if fsdp:
        spec.tp = 1
    return apply_common_env(spec, env)


def main(argv: list[str]) -> int:
    if not argv:
        raise SystemExit("usage: python3 -m simtrainer megatron <family>")
    install_signal_handlers()
    try:
        spec = spec_from_env(argv[0])
    except SystemExit as exc:
        if isinstance(exc.code, str) and exc.code.startswith("Model size not supported"):
            print(exc.code, flush=True)
            return EXIT_BAD_SIZE
        raise
    out = Output(os.environ.get("TRAIN_LOG") or None)
    try:
        return Engine(spec, MegatronVoice(spec, out)).run()
    finally:
        out.close()
