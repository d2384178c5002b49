"""Model FLOPs per token, so TFLOP/s/GPU can be recomputed from tokens/s with one formula.

Images disagree on the FLOPs formula (docs/log_formats.md#flops-per-token): upstream Megatron-LM >= core_v0.12
counts causal attention once (``6·L·s·q``), older builds and the ROCm/Primus images checked use
``12·L·s·q``, 12.5 % more for Llama-3.1-8B at seq 8192. ``recompute_tflops`` always uses the
current formula, so a report can show the image's own number next to a comparable one.

Per token (forward + backward = 3 × forward GEMMs, 2 FLOPs per MAC), for a dense GPT/Llama:
MLP ``6·L·h·f·(3 if gated else 2)``, projections ``6·L·(h·(q+2k) + q·h)``, core attention
``3·L·s·n·(d_qk + d_v)`` (current, causal) or twice that (old), logits ``6·h·V``.
The DeepSeek-V2-Lite entry (MLA + MoE) is best effort: active experts + shared experts only, MLA
projections as plain GEMMs, router ignored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cvs_tasks.families import dims_key


@dataclass(frozen=True)
class ModelDims:
    layers: int
    hidden: int
    ffn_hidden: int
    heads: int
    query_groups: int
    vocab: int = 128256
    head_dim: int | None = None  # kv_channels; default hidden/heads
    gated_mlp: bool = True  # SwiGLU
    # Mixture of experts (None: dense). ffn_hidden is then the dense-layer width.
    moe_ffn_hidden: int | None = None
    moe_active_experts: int = 0  # routed top-k + shared experts
    moe_dense_layers: int = 0  # leading dense layers
    # Multi-head latent attention (None: standard attention).
    mla_kv_lora_rank: int | None = None
    mla_qk_nope_dim: int = 0
    mla_qk_rope_dim: int = 0
    mla_v_dim: int = 0


# Model shapes by dims key; the family rows say which model names and sizes use which.
MODELS: dict[str, ModelDims] = {
    "llama3.1_8b": ModelDims(32, 4096, 14336, 32, 8),
    "llama3.1_70b": ModelDims(80, 8192, 28672, 64, 8),
    "llama3.1_405b": ModelDims(126, 16384, 53248, 128, 8),
    "deepseek_v2_lite": ModelDims(
        27, 2048, 10944, 16, 16, vocab=102400, moe_ffn_hidden=1408, moe_active_experts=6 + 2,
        moe_dense_layers=1, mla_kv_lora_rank=512, mla_qk_nope_dim=128, mla_qk_rope_dim=64,
        mla_v_dim=128,
    ),
}


def model_dims(name: str | None) -> ModelDims | None:
    """Dimensions for a model name (``llama3.1_8B``, ``llama3.3_70B``, ``70B``, ...); None if unknown.

    Which dimensions a name means is its family row's (``cvs_tasks.families``); this table only holds them.
    """
    key = dims_key(name)
    return MODELS.get(key) if key else None


def dims_from_args(args: dict[str, str], base: ModelDims | None = None) -> ModelDims | None:
    """Dimensions from a Megatron arguments dump (dense models); ``base`` fills what is missing."""
    def num(key: str) -> int | None:
        try:
            return int(float(args[key]))
        except (KeyError, ValueError):
            return None

    layers, hidden, heads = num("num_layers"), num("hidden_size"), num("num_attention_heads")
    if not (layers and hidden and heads):
        return base
    groups = num("num_query_groups") if args.get("group_query_attention", "").lower() == "true" else None
    dims = ModelDims(
        layers=layers, hidden=hidden, ffn_hidden=num("ffn_hidden_size") or 4 * hidden, heads=heads,
        query_groups=groups or heads,
        vocab=num("padded_vocab_size") or num("vocab_size") or (base.vocab if base else 128256),
        head_dim=num("kv_channels"), gated_mlp=args.get("swiglu", "True").lower() == "true",
    )
    if base is not None and (base.moe_ffn_hidden or base.mla_kv_lora_rank):
        return base  # MoE / MLA details are not in a short dump: trust the table
    return dims


def flops_per_token(dims: ModelDims, seq_length: int, formula: str = "current") -> float:
    """Model FLOPs per trained token (forward + backward)."""
    if formula not in ("current", "old"):
        raise ValueError(f"formula must be 'current' or 'old', not {formula!r}")
    L, h, n, s = dims.layers, dims.hidden, dims.heads, seq_length
    d = dims.head_dim or h // n
    gate = 3 if dims.gated_mlp else 2
    if dims.moe_ffn_hidden:
        moe_layers = L - dims.moe_dense_layers
        mlp = 6 * h * gate * (dims.moe_dense_layers * dims.ffn_hidden
                              + moe_layers * dims.moe_ffn_hidden * dims.moe_active_experts)
    else:
        mlp = 6 * L * h * dims.ffn_hidden * gate
    if dims.mla_kv_lora_rank:
        r, d_qk, d_v = dims.mla_kv_lora_rank, dims.mla_qk_nope_dim + dims.mla_qk_rope_dim, dims.mla_v_dim
        proj = 6 * L * (h * n * d_qk + h * (r + dims.mla_qk_rope_dim)
                        + r * n * (dims.mla_qk_nope_dim + d_v) + n * d_v * h)
    else:
        q, k = n * d, dims.query_groups * d
        d_qk = d_v = d
        proj = 6 * L * (h * (q + 2 * k) + q * h)
    core = 3 * L * s * n * (d_qk + d_v)
    if formula == "old":
        core *= 2
    logits = 6 * h * dims.vocab
    return float(mlp + proj + core + logits)


def recompute_tflops(tokens_per_gpu: float | None, dims: ModelDims | None,
                     seq_length: int | None) -> float | None:
    """TFLOP/s/GPU implied by tokens/s/GPU under the current formula; None if an input is missing."""
    if tokens_per_gpu is None or dims is None or not seq_length or not math.isfinite(tokens_per_gpu):
        return None
    return tokens_per_gpu * flops_per_token(dims, seq_length) / 1e12
