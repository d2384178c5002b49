"""The effective configuration as the trainer printed it (Megatron-LM or Primus arguments dump).

Values are read as printed (`None`, `True`, numbers) and normalised to what the harness plans in:
precision as a sweep-key spelling (BF16, FP8, MXFP8, MXFP4, FP16), recompute as none / selective
/ full, FSDP and mock data as booleans. A key the dump does not have stays None (not compared).

Types, not spellings: the dump prints each value with `str()`, so a bool reads `True` / `False`,
None reads `None` and a string prints bare. Under an argument Megatron reads as a bool, as None /
full / selective, or as an int, any other text is a string that reached the trainer (`false`,
`null`): it is read the way Megatron reads it (a non-empty string is true) and kept in `strings`,
which the comparison reports with its cause (docs/primus_overrides.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

_NONE = ("", "none", "null")
BOOL_ARGS = ("use_torch_fsdp2", "use_custom_fsdp", "use_megatron_fsdp", "mock_data")
INT_ARGS = ("micro_batch_size", "global_batch_size", "seq_length", "train_iters", "tensor_model_parallel_size",
            "pipeline_model_parallel_size")
GRANULARITIES = ("full", "selective")


@dataclass(frozen=True)
class EffectiveConfig:
    """What the trainer says it runs; None where its dump does not say."""

    world_size: int | None = None
    nnodes: int | None = None
    micro_batch_size: int | None = None
    global_batch_size: int | None = None
    seq_length: int | None = None
    train_iters: int | None = None
    exit_interval: int | None = None
    tensor_model_parallel_size: int | None = None
    pipeline_model_parallel_size: int | None = None
    context_parallel_size: int | None = None
    expert_model_parallel_size: int | None = None
    precision: str | None = None
    fp8_recipe: str | None = None
    recompute: str | None = None
    fsdp: bool | None = None
    mock_data: bool | None = None
    tokenizer: str | None = None
    # arguments that reached Megatron as text where it reads a bool / None / int: name -> the text
    strings: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EffectiveConfig:
        """The record back from a stage file; unknown keys are ignored, values of the wrong type dropped."""
        kept = {name: data[name] for name in _KINDS
                if type(data.get(name)) is _KINDS[name]}  # `type is`: True is not an int here
        if "strings" in kept:
            kept["strings"] = {k: v for k, v in kept["strings"].items() if isinstance(k, str) and isinstance(v, str)}
        return cls(**kept)

    def known(self) -> dict[str, Any]:
        """The fields the dump stated, in declaration order (for the report)."""
        return {k: v for k, v in self.to_dict().items() if v is not None and v != {}}


_KINDS: dict[str, type] = {f.name: (dict if "dict" in str(f.type) else bool if "bool" in str(f.type)
                                    else str if "str" in str(f.type) else int)
                           for f in fields(EffectiveConfig)}


def effective_from_arguments(args: Mapping[str, str], gpus_per_node: int | None = None) -> EffectiveConfig | None:
    """The EffectiveConfig of a dump (`LogParser.arguments`), or None when there is no dump."""
    if not args:
        return None
    world = _int(args.get("world_size"))
    nnodes = world // gpus_per_node if world and gpus_per_node and world % gpus_per_node == 0 else None
    return EffectiveConfig(
        world_size=world,
        nnodes=nnodes,
        micro_batch_size=_int(args.get("micro_batch_size")),
        global_batch_size=_int(args.get("global_batch_size")),
        seq_length=_int(args.get("seq_length")),
        train_iters=_int(args.get("train_iters")),
        exit_interval=_int(args.get("exit_interval")),
        tensor_model_parallel_size=_int(args.get("tensor_model_parallel_size")),
        pipeline_model_parallel_size=_int(args.get("pipeline_model_parallel_size")),
        context_parallel_size=_int(args.get("context_parallel_size")),
        expert_model_parallel_size=_int(args.get("expert_model_parallel_size")),
        precision=_precision(args),
        fp8_recipe=_text(args.get("fp8_recipe")) if _text(args.get("fp8")) else None,
        recompute=_recompute(args),
        fsdp=_fsdp(args),
        mock_data=_truthy(args.get("mock_data")),
        tokenizer=_text(args.get("tokenizer_model")),
        strings=_strings(args),
    )


def _precision(args: Mapping[str, str]) -> str | None:
    """FP4 > FP8 (MXFP8 by recipe) > BF16 > FP16, as Megatron's flags combine; None if unstated."""
    if _text(args.get("fp4")):
        return "MXFP4"
    if _text(args.get("fp8")):
        return "MXFP8" if (_text(args.get("fp8_recipe")) or "").lower() == "mxfp8" else "FP8"
    if _truthy(args.get("bf16")):
        return "BF16"
    if _truthy(args.get("fp16")):
        return "FP16"
    if "bf16" in args or "fp16" in args:
        return "FP32"
    return None


def _recompute(args: Mapping[str, str]) -> str | None:
    """`None` is off; any other text is what Megatron got (`full`, `selective`, or a string it refuses)."""
    granularity = args.get("recompute_granularity")
    if granularity is not None and granularity.strip() != "None":
        return granularity.strip()
    if _truthy(args.get("recompute_activations")):
        return "selective"
    return "none" if "recompute_granularity" in args or "recompute_activations" in args else None


def _fsdp(args: Mapping[str, str]) -> bool | None:
    flags = [_truthy(args.get(k)) for k in ("use_torch_fsdp2", "use_custom_fsdp", "use_megatron_fsdp") if k in args]
    return any(flags) if flags else None


def _strings(args: Mapping[str, str]) -> dict[str, str]:
    """The typed arguments whose printed value is none of their type's spellings: strings."""
    found = {}
    for name in BOOL_ARGS:
        text = args.get(name)
        if text is not None and text.strip() not in ("True", "False", "None") and _number(text) is None:
            found[name] = text.strip()
    granularity = args.get("recompute_granularity")
    if granularity is not None and granularity.strip() not in ("None", *GRANULARITIES):
        found["recompute_granularity"] = granularity.strip()
    for name in INT_ARGS:
        text = args.get(name)
        if text is not None and text.strip() != "None" and _number(text) is None:
            found[name] = text.strip()
    return found


def _truthy(value: str | None) -> bool | None:
    """What `if args.<name>:` makes of the printed value: True / False / None as themselves, a number
    by its value, any other text (a string, even 'false') by being non-empty."""
    if value is None:
        return None
    text = value.strip()
    if text in ("True", "False", "None"):
        return text == "True"
    number = _number(text)
    return number != 0 if number is not None else bool(text)


def _number(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None


def _text(value: str | None) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return None if text.lower() in _NONE else text


def _int(value: str | None) -> int | None:
    text = _text(value)
    if text is None:
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    return int(number) if number.is_integer() and abs(number) < 2**62 else None
