"""Multi-node scaling efficiency in tokens/s (the reference mixed TFLOP/s with a tokens baseline).

efficiency % = (tok/s/GPU × gpus_per_node × nodes) / ((nodes / baseline_nodes) × baseline_total) × 100
where ``baseline_total`` is ``scaling_baseline.tokens_per_sec_total`` (a single-node run's
tok/s/GPU × 8) measured on ``baseline_nodes`` nodes.
"""

from __future__ import annotations

import math


def _positive(x) -> bool:
    try:
        return x is not None and math.isfinite(float(x)) and float(x) > 0
    except (TypeError, ValueError):
        return False


def scaling_efficiency(tokens_per_gpu: float | None, nnodes: int, gpus_per_node: int,
                       baseline_total: float | None, baseline_nodes: int | None) -> float | None:
    """Percent of ideal linear scaling; None when any input is missing, zero or not finite."""
    if not all(_positive(x) for x in (tokens_per_gpu, nnodes, gpus_per_node, baseline_total,
                                      baseline_nodes)):
        return None
    total = float(tokens_per_gpu) * gpus_per_node * nnodes
    ideal = (nnodes / float(baseline_nodes)) * float(baseline_total)
    return total / ideal * 100.0
