"""Model shapes and the Megatron-LM FLOPs-per-token formula (current, causal: 6*L*s*q).

Llama-family numbers follow the formula exactly; MoE/MLA models (DeepSeek-V2-Lite, Mixtral,
Qwen3) use the same terms with the activated experts counted, an approximation that is
documented as such.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSpec:
    name: str
    layers: int
    hidden: int
    ffn: int
    heads: int
    groups: int
    vocab: int
    seq: int
    kv_channels: int = 0          # 0 -> hidden // heads
    experts_active: int = 1       # routed experts per token (1 = dense MLP)
    shared_experts: int = 0
    params_b: float = 0.0         # for the "Total number of parameters" start-up line

    @property
    def head_dim(self) -> int:
        return self.kv_channels or self.hidden // self.heads


MODELS: dict[str, ModelSpec] = {
    "llama3.1_8B": ModelSpec("llama3.1_8B", 32, 4096, 14336, 32, 8, 128256, 8192, params_b=8.03),
    "llama3.3_70B": ModelSpec("llama3.3_70B", 80, 8192, 28672, 64, 8, 128256, 8192, params_b=70.55),
    "llama3.1_70B": ModelSpec("llama3.1_70B", 80, 8192, 28672, 64, 8, 128256, 8192, params_b=70.55),
    "llama3.1_405B": ModelSpec("llama3.1_405B", 126, 16384, 53248, 128, 8, 128256, 8192, params_b=405.85),
    "llama2_7B": ModelSpec("llama2_7B", 32, 4096, 11008, 32, 32, 32000, 4096, params_b=6.74),
    "llama2_13B": ModelSpec("llama2_13B", 40, 5120, 13824, 40, 40, 32000, 4096, params_b=13.02),
    "llama2_70B": ModelSpec("llama2_70B", 80, 8192, 28672, 64, 8, 32000, 4096, params_b=68.98),
    "deepseek_v2_lite": ModelSpec("deepseek_v2_lite", 27, 2048, 1408, 16, 16, 102400, 4096,
                                  kv_channels=192, experts_active=6, shared_experts=2, params_b=15.7),
    "mixtral_8x7B": ModelSpec("mixtral_8x7B", 32, 4096, 14336, 32, 8, 32000, 4096,
                              experts_active=2, params_b=46.7),
    "qwen3_8B": ModelSpec("qwen3_8B", 36, 4096, 12288, 32, 8, 151936, 4096, kv_channels=128, params_b=8.19),
    "qwen2_7B": ModelSpec("qwen2_7B", 28, 3584, 18944, 28, 4, 152064, 4096, kv_channels=128, params_b=7.62),
}

_BY_FAMILY_SIZE = {
    ("llama3", "8"): "llama3.1_8B", ("llama3", "70"): "llama3.3_70B", ("llama3", "405"): "llama3.1_405B",
    ("llama2", "7"): "llama2_7B", ("llama2", "13"): "llama2_13B", ("llama2", "70"): "llama2_70B",
}
MODEL_SIZES: dict[str, tuple[str, ...]] = {"llama3": ("8", "70", "405"), "llama2": ("7", "13", "70"),
                                           "deepseek": ("16B",)}
"""MODEL_SIZE values a script knows; any other stops it (families not listed take any size)."""
_FAMILY_DEFAULT = {
    "llama3": "llama3.1_8B", "llama2": "llama2_7B", "deepseek": "deepseek_v2_lite",
    "mixtral": "mixtral_8x7B", "qwen3": "qwen3_8B", "qwen2": "qwen2_7B",
}


def model_for(family: str, model_size: str | None) -> ModelSpec:
    """The model a Megatron-LM family script trains for MODEL_SIZE (unknown size -> family default)."""
    key = _BY_FAMILY_SIZE.get((family, (model_size or "").strip()), _FAMILY_DEFAULT[family])
    return MODELS[key]


def model_by_name(name: str) -> ModelSpec:
    """A model by Primus/CVS model name (`llama3.1_8B`, `deepseek_v2_lite`, ...)."""
    if name in MODELS:
        return MODELS[name]
    lowered = {k.lower(): v for k, v in MODELS.items()}
    if name.lower() in lowered:
        return lowered[name.lower()]
    raise KeyError(name)


def flops_per_token(model: ModelSpec, seq: int) -> float:
    """Training FLOPs per token (forward + backward) with the current Megatron-LM formula."""
    L, h, f = model.layers, model.hidden, model.ffn
    q = model.heads * model.head_dim
    k = model.groups * model.head_dim
    mlp_copies = model.experts_active + model.shared_experts
    mlp = 6 * L * h * f * 3 * mlp_copies
    attention_proj = 6 * L * (h * (q + 2 * k) + q * h)
    core_attention = 6 * L * seq * q
    logits = 6 * h * model.vocab
    return float(mlp + attention_proj + core_attention + logits)
