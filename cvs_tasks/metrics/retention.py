"""Bounded memory for very long logs: keep every iteration of a realistic run, thin beyond that.

Retention rule (what ``LogParser.iterations`` holds):

* up to ``RETAIN`` (100 000) iterations, every parsed iteration is kept — a realistic run
  (a few thousand steps) is never thinned;
* past that the store keeps the first step, the latest step and the steps that are multiples
  of a *stride*. Whenever the store passes ``RETAIN`` rows the stride doubles (starting at 2)
  until at most ``RETAIN / 2`` rows remain, so a log of any length keeps between ``RETAIN / 4``
  and ``RETAIN`` rows spread evenly over the run (e.g. 43 843 of a 2.79 M-step log, stride 64),
  plus the last row of each parsed window and rows that arrived out of order until the next
  thinning. Loss curves, plots and ``convergence`` of such a run therefore see every stride-th
  step; the run metrics do not depend on what is kept.

Rows that leave the store are *folded* into ``Folded``: the run metrics stay exact because
they only need sums (means, harmonic means via sums of reciprocals) and, for the step-time
percentiles, the count of every distinct logged step time. Megatron prints step times with
one decimal, so the distinct values stay few (a run whose step time varies within ±1 s has
at most 20 000); memory grows with the distinct values, never with the step count.

A folded row counts as warm-up or steady state by the warm-up cutoff known when it was folded
(``aggregate.warmup_cutoff``; the planned count is printed on every line, so it is known from
the first line). Two rare events can make folded sums disagree with a full recount, and both
are detected and reported by ``Folded.exact``: the planned count changing later so that the
cutoff moves across folded steps, and a step that was already folded being logged again
(a restart from an old checkpoint appended to the same log).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from collections import Counter
from itertools import compress, repeat
from operator import mod, ne, not_, truediv
from typing import Sequence

from cvs_tasks.metrics import native
from cvs_tasks.metrics.iteration import to_float

RETAIN = 100_000
FIRST_STRIDE = 2
_INF = math.inf


def keep_mask(steps: Sequence[int], stride: int, keep_last: bool = True) -> list[bool]:
    """True for the rows the retention rule keeps at ``stride`` (multiples; the last row)."""
    mask = list(map(not_, map(mod, steps, repeat(stride))))
    if keep_last and mask:
        mask[-1] = True
    return mask


def next_stride(steps: Sequence[int], stride: int, limit: int) -> int:
    """The smallest doubling of ``stride`` (at least FIRST_STRIDE) keeping at most ``limit`` steps."""
    stride = max(FIRST_STRIDE, stride)
    while sum(map(not_, map(mod, steps, repeat(stride)))) > limit:
        stride *= 2
    return stride


def _floats(col: Sequence) -> array:
    if isinstance(col, array):
        return col
    try:
        return array("d", map(float, col))
    except (TypeError, ValueError):
        return array("d", map(to_float, col))


def _positive_reciprocals(values: array) -> tuple[int, float]:
    """(count, sum of 1/v) over the values with 0 < v < inf."""
    if not values:
        return 0, 0.0
    if min(values) > 0.0 and max(values) < _INF:
        total = sum(map(truediv, repeat(1.0), values))
        if total == total:  # no NaN among them
            return len(values), total
    usable = [v for v in values if 0.0 < v < _INF]
    return len(usable), sum(1.0 / v for v in usable)


def _value_counts(col: Sequence) -> dict[float, int]:
    """Logged value (text or float) -> how many rows logged it, keyed by its float value.

    Non-finite floats may be left out (every caller drops them)."""
    if isinstance(col, array) and native.AVAILABLE:
        return native.value_counts(col)
    counts = Counter(col)
    try:
        out = dict(zip(map(float, counts), counts.values()))
        if len(out) == len(counts):  # no two spellings of one value ("1.0", "1.00")
            return out
    except (TypeError, ValueError):
        pass
    out = {}
    for key, count in counts.items():
        value = to_float(key)
        out[value] = out.get(value, 0) + count
    return out


def _positive_sum(values: array) -> tuple[int, float]:
    """(count, sum) over the values with 0 < v < inf."""
    if values and min(values) > 0.0 and max(values) < _INF:
        total = sum(values)
        if total == total:
            return len(values), total
    usable = [v for v in values if 0.0 < v < _INF]
    return len(usable), sum(usable)


def _first_finite(steps: Sequence[int], losses: Sequence, order) -> tuple[int, float] | None:
    for i in order:
        value = to_float(losses[i]) if not isinstance(losses[i], float) else losses[i]
        if -_INF < value < _INF:
            return steps[i], value
    return None


class Folded:
    """Exact run-metric sums of the rows no longer kept (steady state unless noted)."""

    def __init__(self) -> None:
        self.rows = 0
        self.max_step = -1
        self.step_times: Counter = Counter()  # logged elapsed ms (str or float) -> count
        self.tflops_n, self.tflops_inv = 0, 0.0
        self.tokens_n, self.tokens_inv = 0, 0.0  # logged tokens/s/GPU
        self.derived_n, self.derived_ms_per_gbs = 0, 0.0  # rows whose tokens must be derived
        self.mem_n, self.mem_sum = 0, 0.0
        self.first_loss: tuple[int, float] | None = None
        self.last_loss: tuple[int, float] | None = None
        self.ranges: dict[int, list[int]] = {}  # warm-up cutoff used -> [first, last] step folded
        self.late = False  # a folded step was logged again

    def add(self, steps: Sequence[int], cutoff: int, elapsed: Sequence, tflops: Sequence | None,
            tokens: Sequence | None, mem: Sequence | None, gbs: Sequence | float | None,
            losses: Sequence | None) -> None:
        """Fold rows sorted by step. Columns are float arrays or the logged strings (None = absent)."""
        n = len(steps)
        if not n:
            return
        self.rows += n
        self.max_step = max(self.max_step, steps[-1])
        span = self.ranges.setdefault(cutoff, [steps[0], steps[-1]])
        span[0], span[1] = min(span[0], steps[0]), max(span[1], steps[-1])
        if losses is not None:
            first = _first_finite(steps, losses, range(n))
            if first is not None and (self.first_loss is None or first[0] < self.first_loss[0]):
                self.first_loss = first
            last = _first_finite(steps, losses, range(n - 1, -1, -1))
            if last is not None and (self.last_loss is None or last[0] > self.last_loss[0]):
                self.last_loss = last
        k = bisect_right(steps, cutoff)
        if k >= n:
            return
        ms = _floats(elapsed[k:])
        if native.AVAILABLE:  # the same counts, without a float object per row
            native.value_counts(ms, into=self.step_times)
        else:
            self.step_times.update(ms)
        # Throughput and memory values repeat a lot (one or four decimals): count them first and
        # convert each distinct value once; the sums are over (value, count) pairs.
        if tflops is not None:
            for value, count in _value_counts(tflops[k:]).items():
                if 0.0 < value < _INF:
                    self.tflops_n += count
                    self.tflops_inv += count / value
        if mem is not None:
            for value, count in _value_counts(mem[k:]).items():
                if -_INF < value < _INF:
                    self.mem_n += count
                    self.mem_sum += count * value
        if gbs is not None and not isinstance(gbs, (int, float)):
            gbs = gbs[k:]
            if gbs and gbs.count(gbs[0]) == len(gbs):
                gbs = to_float(gbs[0])
        if tokens is None:
            if gbs is not None:
                self._add_derived(ms, gbs)
            return
        logged = _floats(tokens[k:])
        missing = None
        if sum(logged) != sum(logged):  # NaN: some rows printed no tokens (or +inf and -inf)
            missing = list(map(ne, logged, logged))  # NaN != NaN
            logged = array("d", compress(logged, map(not_, missing)))
        count, inv = _positive_reciprocals(logged)
        self.tokens_n += count
        self.tokens_inv += inv
        if missing is not None and gbs is not None:
            ms = array("d", compress(ms, missing))
            if not isinstance(gbs, (int, float)):
                gbs = list(compress(gbs, missing))
            self._add_derived(ms, gbs)

    def _add_derived(self, ms: array, gbs: Sequence | float) -> None:
        """Sum of ms/GBS: tokens derived as GBS*seq/(s*world) need only this sum (harmonic mean)."""
        if isinstance(gbs, (int, float)):
            g = float(gbs)
            if 0.0 < g < _INF:
                count, total = _positive_sum(ms)
                self.derived_n += count
                self.derived_ms_per_gbs += total / g
            return
        for m, b in zip(ms, _floats(gbs)):
            if 0.0 < m < _INF and 0.0 < b < _INF:
                self.derived_n += 1
                self.derived_ms_per_gbs += m / b

    def exact(self, cutoff: int) -> bool:
        """False when a folded row would be classified differently at ``cutoff``, or was re-logged."""
        if self.late:
            return False
        for used, (first, last) in self.ranges.items():
            if used != cutoff and first <= max(used, cutoff) and last > min(used, cutoff):
                return False
        return True
