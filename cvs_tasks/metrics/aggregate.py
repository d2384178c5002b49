"""From per-iteration values to the run metrics every gate and report uses.

Warm-up rule (``warmup_cutoff``): a log whose first step is S0 and whose plan is P iterations (or,
when the log never said, the last step seen) treats its first ``max(1, int(0.1 * (P - S0 + 1)))``
steps as warm-up and ignores them; the rest is *steady state*. A fresh run (S0 = 1) drops
``step <= max(1, int(0.1 * P))``; a resumed one counts from its restart, because every process
start pays compile, allocator and NCCL set-up again: resumed at 14001 of 15550 it drops 14001-14155
(10 % of the plan would drop nothing there and keep the slow restart step). ``runstats`` applies
it per attempt and adds what it reads from the lines (running averages, runs that die in warm-up).

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

Values that are NaN, infinite or not positive (rates, times) are left out; a metric with no
usable sample is None. ``runstats`` keeps what these statistics need while the log streams past.
The ROCm launcher's four summary lines are *not* preferred (they use another warm-up rule); they
fill a metric only when the iterations cannot produce it (e.g. no seq length for tokens/s, or
the log tail without iteration lines).
"""

from __future__ import annotations

import math
from typing import Sequence

from cvs_tasks.metrics import catalog


def warmup_cutoff(planned: int | None, last_step: int | None, start: int = 1) -> int:
    """Last warm-up step of a log starting at ``start``: ``start - 1 + max(1, int(0.1 * (P - start + 1)))``,
    P = planned count, else the last step seen."""
    basis = planned if planned and planned > 0 else (last_step or 0)
    return start - 1 + max(1, int(0.1 * max(basis - start + 1, 0)))


def derived_tokens(gbs: float | None, elapsed_ms: float, seq_length: int | None,
                   world_size: int | None) -> float | None:
    """tok/s/GPU = GBS * seq / (elapsed_s * world); None when an input is unknown or not > 0."""
    if not seq_length or not world_size or gbs is None or not (gbs > 0) or not (0 < elapsed_ms < math.inf):
        return None
    return gbs * seq_length * 1000.0 / (elapsed_ms * world_size)


def fill_from_summary(metrics: dict[str, float | None],
                      summary: dict[str, float]) -> dict[str, float | None]:
    """Fill metrics the iterations could not produce from the ROCm launcher summary lines."""
    out = dict(metrics)
    for name, label in catalog.summary_labels().items():
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
