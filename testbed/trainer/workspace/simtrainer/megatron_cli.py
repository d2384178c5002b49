"""Megatron-LM entry point: the env vars the ROCm fork's example scripts read, per model family.

| family   | MBS / GBS env                        | TP / PP / SEQ env          | iterations  | precision  |
|----------|--------------------------------------|----------------------------|-------------|------------|
| llama3/2 | MBS / BS                             | TP / PP / SEQ_LENGTH       | TOTAL_ITERS | TE_FP8/TE_FP4 |
| qwen2    | MBS / BS                             | TP / PP / SEQ_LENGTH       | TOTAL_ITERS | TE_FP8     |
| deepseek | MBS / GBS                            | TP / PP / SEQ_LENGTH       | TRAIN_ITERS | PR         |
| mixtral  | MBS / GBS                            | TP_SIZE / PP_SIZE / SEQLEN | TRAIN_ITERS | PR         |
| qwen3    | MICRO_BATCH_SIZE / GLOBAL_BATCH_SIZE | TP / PP / SEQ_LENGTH       | TRAIN_ITERS | PR         |
"""
from __future__ import annotations

import os

from .engine import Engine, install_signal_handlers
from .models import model_for
from .output import Output
from .spec import JobSpec, apply_common_env, env_int
from .voices import MegatronVoice

FAMILIES = ("llama3", "llama2", "deepseek", "mixtral", "qwen3", "qwen2")
BATCH_ENV = {"llama3": ("MBS", "BS"), "llama2": ("MBS", "BS"), "qwen2": ("MBS", "BS"),
             "deepseek": ("MBS", "GBS"), "mixtral": ("MBS", "GBS"),
             "qwen3": ("MICRO_BATCH_SIZE", "GLOBAL_BATCH_SIZE")}
DEFAULT_BATCH = (2, 128)


def precision_from_env(family: str, env: dict) -> str:
    if family in ("deepseek", "mixtral", "qwen3"):
        pr = (env.get("PR") or "bf16").lower()
        if pr == "fp8":
            return "MXFP8" if env.get("FP8_RECIPE") == "mxfp8" else "FP8"
        return pr.upper()
    if env.get("TE_FP4") == "1":
        return "MXFP4"
    if env.get("TE_FP8", "0") == "1":
        return "MXFP8" if env.get("TE_FP8_RECIPE") == "mxfp8" else "FP8"
    return "BF16"


def spec_from_env(family: str, env: dict | None = None) -> JobSpec:
    env = dict(os.environ if env is None else env)
    if family not in FAMILIES:
        raise SystemExit(f"unknown model family {family!r} (known: {', '.join(FAMILIES)})")
    model = model_for(family, env.get("MODEL_SIZE"))
    mbs_name, gbs_name = BATCH_ENV[family]
    tp_name, pp_name, seq_name = ("TP_SIZE", "PP_SIZE", "SEQLEN") if family == "mixtral" else ("TP", "PP", "SEQ_LENGTH")
    iters_name = "TOTAL_ITERS" if family in ("llama3", "llama2", "qwen2") else "TRAIN_ITERS"
    spec = JobSpec(backend="megatron", model=model,
                   micro_batch=env_int(env, mbs_name, DEFAULT_BATCH[0]),
                   global_batch=env_int(env, gbs_name, DEFAULT_BATCH[1]),
                   train_iters=env_int(env, iters_name, 10),
                   seq=env_int(env, seq_name, model.seq),
                   tp=env_int(env, tp_name, 1), pp=env_int(env, pp_name, 1),
                   precision=precision_from_env(family, env), master_port=6000,
                   dialect="upstream" if env.get("SIM_LOG_DIALECT") == "upstream" else "rocm")
    spec.extra_args = {"recompute_granularity": "full" if env.get("RECOMPUTE") == "1" else None,
                       "use_torch_fsdp2": env.get("FSDP") == "1",
                       "tokenizer_model": env.get("TOKENIZER_MODEL") or None,
                       "data_cache_path": env.get("DATA_CACHE_PATH") or None,
                       "mock_data": env.get("MOCK_DATA", "1") == "1"}
    if env.get("FSDP") == "1":
        spec.tp = 1
    return apply_common_env(spec, env)


def main(argv: list[str]) -> int:
    if not argv:
        raise SystemExit("usage: python3 -m simtrainer megatron <family>")
    install_signal_handlers()
    spec = spec_from_env(argv[0])
    out = Output(os.environ.get("TRAIN_LOG") or None)
    try:
        return Engine(spec, MegatronVoice(spec, out)).run()
    finally:
        out.close()
