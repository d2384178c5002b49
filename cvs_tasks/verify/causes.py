"""The likely cause of a difference between what was asked and what the trainer ran, per launcher.

Facts from running the real launchers (docs/launch_contracts.md): which variable a script reads under
another name, which it pins, which only newer images read. One row per (launcher, parameter);
anything else gets a generic cause that names the launcher and the variable it was given.
"""

from __future__ import annotations

CAUSES: dict[tuple[str, str], str] = {
    ("deepseek", "world_size"): "{script} in this image pins NNODES=1, NODE_RANK=0 and MASTER_ADDR=localhost: "
                                "every node trained alone",
    ("deepseek", "nnodes"): "{script} in this image pins NNODES=1: every node trained alone",
    ("deepseek", "seq_length"): "{script} in this image reads SEQ_LEN, not SEQ_LENGTH (default 2048)",
    ("deepseek", "recompute"): "{script} in this image reads AC (default sel: selective recompute), not RECOMPUTE",
    ("deepseek", "train_iters"): "{script} in this image pins --exit-interval 50",
    ("deepseek", "tensor_model_parallel_size"): "{script} in this image pins TP=1",
    ("deepseek", "pipeline_model_parallel_size"): "{script} in this image pins PP=1",
    ("deepseek", "micro_batch_size"): "{script} in this image pins MBS (the Feb 2025 script pins the whole run)",
    ("deepseek", "global_batch_size"): "{script} in this image pins GBS (the Feb 2025 script pins the whole run)",
    ("deepseek", "tokenizer"): "{script} in this image pins TOKENIZER_MODEL=deepseek-ai/DeepSeek-V2-Lite",
    ("llama-3", "precision"): "{script} in this image does not read TE_FP4 / TE_FP8_RECIPE "
                              "(only the 2026 script does): MXFP4 trains BF16, MXFP8 delayed-scaling FP8",
    ("llama-3", "mock_data"): "{script} in this image ignores MOCK_DATA (the 2026 script uses mock data "
                              "only when DATA_PATH is unset)",
    ("llama-3", "tensor_model_parallel_size"): "{script} forces TP=1 when FSDP=1",
    ("llama-3", "tokenizer"): "{script} in this image overrides TOKENIZER_MODEL",
    ("primus", "seq_length"): "Primus takes seq_length from the experiment YAML when it is not passed as an override",
    ("primus", "recompute"): "Primus takes recompute_* from the experiment YAML when it is not passed as an override",
    ("primus", "fsdp"): "Primus takes use_torch_fsdp2 from the experiment YAML (the 70B YAML turns FSDP2 on)",
    ("primus", "mock_data"): "the experiment YAML sets mock_data",
    ("primus", "world_size"): "primus-cli did not get NNODES / NODE_RANK / MASTER_ADDR as the wrapper set them",
}

VARIABLE = {
    "world_size": "NNODES", "nnodes": "NNODES", "seq_length": "the sequence length",
    "micro_batch_size": "the micro batch", "global_batch_size": "the global batch",
    "train_iters": "the iteration count", "tensor_model_parallel_size": "TP",
    "pipeline_model_parallel_size": "PP", "precision": "the precision", "recompute": "RECOMPUTE",
    "fsdp": "FSDP", "mock_data": "MOCK_DATA", "tokenizer": "TOKENIZER_MODEL",
}


def likely_cause(launcher: str, script: str, param: str) -> str:
    """Why `param` may differ, for launcher `launcher` (a family name or `primus`) run through `script`."""
    known = CAUSES.get((launcher, param))
    if known:
        return known.format(script=script)
    return f"{script} did not pass {VARIABLE.get(param, param)} through to the trainer as the wrapper set it"


# What a string under a bool argument turns on when Megatron reads it by truthiness.
STRING_ON = {"use_torch_fsdp2": "FSDP2 is on", "use_custom_fsdp": "custom FSDP is on",
             "use_megatron_fsdp": "Megatron FSDP is on", "mock_data": "mock data is on"}
STRING_SOURCE = {
    "primus": "Primus sets an override or YAML value as its parser left it: a spelling this version keeps "
              "as text (docs/primus_overrides.md); pass True, False, None or a plain number",
}


def string_cause(launcher: str, script: str, name: str, text: str) -> str:
    """Why a typed argument that reached the trainer as text `text` is not what it looks like."""
    if name == "recompute_granularity":
        effect = (f"{text!r} is the string {text!r}, not None: Megatron's TransformerConfig raises "
                  f"'When using recompute_granuarlity: {text} must be \"full\"or \"selective\".' at start")
    elif name in STRING_ON:
        effect = (f"{text!r} is the string {text!r}, which is true in Python: {STRING_ON[name]}" if text else
                  "'' is the empty string, which is false in Python")
    else:
        effect = f"{text!r} is the string {text!r}, not a number Megatron can use"
    source = STRING_SOURCE.get(launcher, f"{script} passed it to the trainer as text")
    return f"{effect} ({source})"
