"""From per-iteration values to the run metrics every gate and report uses.

Warm-up rule (the one rule, used by run metrics, step-time percentiles, the loss curve and the
checkpoint-free statistics): with P the planned iteration count (or, when the log never said, the
last step seen), iterations with ``step <= max(1, int(0.1 * P))`` are warm-up and ignored; the
rest is *steady state*. The first step is always warm-up (compile, allocator and NCCL set-up).

Statistics over steady state, one rule per kind of quantity:

* ``training.elapsed_time_per_iteration`` (ms) — arithmetic mean of the instantaneous step times.
* ``training.throughput_per_gpu`` (TFLOP/s/GPU) and ``training.tokens_per_gpu`` (tok/s/GPU) —
  harmonic mean of the instantaneous rates. With constant work per step this equals work / mean
  step time, so the three numbers agree with each other; the backend's own running averages
  (Primus ``X/Y`` Y values) are not used.
* ``training.tokens_per_gpu`` uses the logged tokens when a line has them, else
  ``GBS * seq_length / (elapsed_s * world_size)`` when seq length and world size are known.
* ``training.mem_usage`` (ratio 0-1) — arithmetic mean of the per-step ratio (ROCm
  ``mem usages:`` or Primus hip ``usage_ratio`` / 100; both come from ``torch.cuda.mem_get_info``).
* ``training.step_time_p50_ms`` / ``_p95_ms`` — linear-interpolated percentiles of the step times
  (rank q/100·(n−1)).

Values that are NaN, infinite or not positive (rates, times) are left out; a metric with no usable
sample is None. The ROCm launcher's four summary lines are *not* preferred (they use another
warm-up rule); they fill a metric only when the iterations cannot produce it (e.g. no seq length
for tokens/s, or the log tail without iteration lines).
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

RUN_METRICS = (
    "training.throughput_per_gpu",
    "training.tokens_per_gpu",
    "training.elapsed_time_per_iteration",
    "training.mem_usage",
    "training.step_time_p50_ms",
    "training.step_time_p95_ms",
)
SUMMARY_KEYS = {  # ROCm launcher summary line label -> metric
    "throughput per gpu": "training.throughput_per_gpu",
    "elapsed time per iteration": "training.elapsed_time_per_iteration",
    "tokens/gpu/s": "training.tokens_per_gpu",
    "mem usages": "training.mem_usage",
}


def warmup_cutoff(planned: int | None, last_step: int | None) -> int:
    """Last warm-up step: ``max(1, int(0.1 * P))``, P = planned count, else the last step seen."""
    basis = planned if planned and planned > 0 else (last_step or 0)
    return max(1, int(0.1 * basis))


def _usable(values: Iterable[float], positive: bool) -> list[float]:
    if positive:
        return [v for v in values if 0.0 < v < math.inf]
    return [v for v in values if -math.inf < v < math.inf]


def mean(values: Iterable[float]) -> float | None:
    vals = _usable(values, positive=False)
    return sum(vals) / len(vals) if vals else None


def harmonic_mean(values: Iterable[float]) -> float | None:
    vals = _usable(values, positive=True)
    return len(vals) / sum(1.0 / v for v in vals) if vals else None


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks, rank = q/100 * (n-1)."""
    n = len(sorted_values)
    if n == 0:
        return None
    rank = q / 100.0 * (n - 1)
    lo = int(math.floor(rank))
    hi = min(lo + 1, n - 1)
    frac = rank - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


def derived_tokens(gbs: float, elapsed_ms: float, seq_length: int | None,
                   world_size: int | None) -> float | None:
    """tok/s/GPU = GBS * seq / (elapsed_s * world); None when an input is unknown or not > 0."""
    if not seq_length or not world_size or not (gbs > 0) or not (0 < elapsed_ms < math.inf):
        return None
    return gbs * seq_length * 1000.0 / (elapsed_ms * world_size)


def tokens_column(logged: Sequence[float], gbs: Sequence[float], elapsed: Sequence[float],
                  seq_length: int | None, world_size: int | None) -> list[float]:
    """Per-step tokens/s/GPU: logged when printed, else derived (NaN when neither is possible)."""
    out = []
    for tok, g, ms in zip(logged, gbs, elapsed):
        if tok == tok:
            out.append(tok)
        else:
            d = derived_tokens(g, ms, seq_length, world_size)
            out.append(math.nan if d is None else d)
    return out


def run_metrics(elapsed: Sequence[float], tflops: Sequence[float], tokens: Sequence[float],
                mem: Sequence[float]) -> dict[str, float | None]:
    """The ``training.*`` run metrics from steady-state columns (already cut after warm-up)."""
    times = sorted(_usable(elapsed, positive=True))
    return {
        "training.throughput_per_gpu": harmonic_mean(tflops),
        "training.tokens_per_gpu": harmonic_mean(tokens),
        "training.elapsed_time_per_iteration": sum(times) / len(times) if times else None,
        "training.mem_usage": mean(mem),
        "training.step_time_p50_ms": percentile(times, 50.0),
        "training.step_time_p95_ms": percentile(times, 95.0),
    }


def fill_from_summary(metrics: dict[str, float | None],
                      summary: dict[str, float]) -> dict[str, float | None]:
    """Fill metrics the iterations could not produce from the ROCm launcher summary lines."""
    out = dict(metrics)
    for label, name in SUMMARY_KEYS.items():
        value = summary.get(label)
        if out.get(name) is None and value is not None and math.isfinite(value):
            out[name] = value
    return out


def percentile_of_counts(items: Sequence[tuple[float, int]], total: int, q: float) -> float | None:
    """``percentile`` over a multiset given as sorted (value, count) pairs."""
    if total == 0:
        return None
    rank = q / 100.0 * (total - 1)
    lo = int(math.floor(rank))
    hi = min(lo + 1, total - 1)
    below, lo_value, hi_value = 0, None, None
    for value, count in items:
        below += count
        if lo_value is None and lo < below:
            lo_value = value
        if hi < below:
            hi_value = value
            break
    return lo_value + (hi_value - lo_value) * (rank - lo)


def merged_run_metrics(elapsed: Sequence[float], tflops: Sequence[float], tokens: Sequence[float],
                       mem: Sequence[float], folded, derived_scale: float | None) -> dict[str, float | None]:
    """``run_metrics`` over kept steady rows plus the sums of folded rows (``retention.Folded``).

    ``derived_scale`` is world/(seq*1000): a folded row without logged tokens contributes
    1/tokens = ms/GBS * scale to the harmonic mean; None when seq length or world size is unknown.
    """
    counts: dict[float, int] = {}
    for value, count in folded.step_times.items():
        if 0.0 < value < math.inf:
            counts[value] = counts.get(value, 0) + count
    for value in _usable(elapsed, positive=True):
        counts[value] = counts.get(value, 0) + 1
    items = sorted(counts.items())
    n_times = sum(counts.values())
    sum_times = sum(v * c for v, c in items)

    def harmonic(values, n_extra: int, inv_extra: float) -> float | None:
        vals = _usable(values, positive=True)
        n = len(vals) + n_extra
        return n / (sum(1.0 / v for v in vals) + inv_extra) if n else None

    tok_n, tok_inv = folded.tokens_n, folded.tokens_inv
    if derived_scale is not None:
        tok_n += folded.derived_n
        tok_inv += folded.derived_ms_per_gbs * derived_scale
    mems = _usable(mem, positive=False)
    mem_n = len(mems) + folded.mem_n
    return {
        "training.throughput_per_gpu": harmonic(tflops, folded.tflops_n, folded.tflops_inv),
        "training.tokens_per_gpu": harmonic(tokens, tok_n, tok_inv),
        "training.elapsed_time_per_iteration": sum_times / n_times if n_times else None,
        "training.mem_usage": (sum(mems) + folded.mem_sum) / mem_n if mem_n else None,
        "training.step_time_p50_ms": percentile_of_counts(items, n_times, 50.0),
        "training.step_time_p95_ms": percentile_of_counts(items, n_times, 95.0),
    }
