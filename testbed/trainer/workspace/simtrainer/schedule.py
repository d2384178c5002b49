"""Deterministic per-step values: loss, grad norm, learning rate, step time, memory.

Everything is a pure function of the step (and the run's settings), so a resumed run continues
exactly the curve the first run was on, and every node computes the same numbers.
"""
from __future__ import annotations

import math

WARMUP_FACTORS = {1: 3.0, 2: 1.15}   # first iterations include compile/warm-up time


def _noise(step: int, salt: int = 0) -> float:
    """A repeatable pseudo-random value in [-1, 1) for a step."""
    x = (step * 2654435761 + salt * 40503 + 12345) % 4294967296
    x = (x ^ (x >> 13)) * 1274126177 % 4294967296
    return (x % 20000) / 10000.0 - 1.0


def loss_at(step: int, precision: str = "BF16") -> float:
    """Training loss: exponential decay towards 1.9 with small repeatable noise."""
    offset = 0.01 if precision.upper().startswith(("FP8", "MXFP8")) else 0.0
    return 1.9 + offset + 10.0 * math.exp(-step / 15.0) + 0.03 * _noise(step, 1)


def grad_norm_at(step: int) -> float:
    return 0.8 + 14.2 * math.exp(-step / 6.0) + 0.05 * abs(_noise(step, 2))


def learning_rate_at(step: int, total: int, max_lr: float = 1.0e-4, min_lr: float = 1.0e-5,
                     warmup: int = 2) -> float:
    """Linear warm-up then cosine decay, like `--lr-decay-style cosine`."""
    if step <= warmup:
        return max_lr * step / max(warmup, 1)
    span = max(total - warmup, 1)
    progress = min(max(step - warmup, 0) / span, 1.0)
    return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * progress))


def step_time_ms(step: int, base_ms: float, slowdown: float = 1.0) -> float:
    """The iteration time the log reports: base x slowdown x warm-up x ±1.5 % jitter."""
    return base_ms * slowdown * WARMUP_FACTORS.get(step, 1.0) * (1.0 + 0.015 * _noise(step, 3))


def mem_fraction(micro_batch: int, precision: str, step: int) -> float:
    """Fraction of device memory in use (ROCm fork `mem usages`)."""
    base = 0.42 + 0.045 * micro_batch - (0.03 if precision.upper().startswith("FP8") else 0.0)
    return min(0.97, max(0.05, base + 0.002 * _noise(step, 4)))


def tokens_per_gpu(global_batch: int, seq: int, elapsed_ms: float, world: int) -> float:
    return global_batch * seq / (elapsed_ms / 1000.0) / world


def tflops_per_gpu(tokens_per_gpu_s: float, flops_per_token: float) -> float:
    return tokens_per_gpu_s * flops_per_token / 1e12
