"""The likely cause of a difference between what was asked and what the trainer ran, per launcher.

Facts from running the real launchers (docs/launch_contracts.md): which variable a script reads under
another name, which it pins, which only newer images read. A Megatron-LM family script's causes are
in its family row (``cvs_tasks.families``); Primus's are below. Anything else gets a generic cause
that names the launcher and the variable it was given.
"""

from __future__ import annotations

from cvs_tasks.families import family_cause

# Launchers that are not a model family: launcher -> parameter -> cause.
LAUNCHER_CAUSES: dict[str, dict[str, str]] = {
    "primus": {
        "seq_length": "Primus takes seq_length from the experiment YAML when it is not passed as an override",
        "recompute": "Primus takes recompute_* from the experiment YAML when it is not passed as an override",
        "fsdp": "Primus takes use_torch_fsdp2 from the experiment YAML (the 70B YAML turns FSDP2 on)",
        "mock_data": "the experiment YAML sets mock_data",
        "world_size": "primus-cli did not get NNODES / NODE_RANK / MASTER_ADDR as the wrapper set them",
    },
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
    known = family_cause(launcher, param) or LAUNCHER_CAUSES.get(launcher, {}).get(param)
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
