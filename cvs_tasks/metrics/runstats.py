"""The run metrics every gate and report uses, exact over a log of any length: the rules that turn
per-iteration values into them, and the streaming sums that keep what those rules need.

Warm-up rule (``warmup_cutoff``): a log whose first step is S0 and whose plan is P iterations (or,
when the log never said, the last step seen) treats its first ``max(1, int(0.1 * (P - S0 + 1)))``
steps as warm-up and ignores them; the rest is *steady state*. A fresh run (S0 = 1) drops
``step <= max(1, int(0.1 * P))``; a resumed one counts from its restart, because every process
start pays compile, allocator and NCCL set-up again: resumed at 14001 of 15550 it drops 14001-14155
(10 % of the plan would drop nothing there and keep the slow restart step). The rule applies to
each attempt. When no step is past the warm-up (a run that died at step 5 of 50) the metrics come
from the steps after the first one, else from the only step; ``basis`` says which steps were used.

Statistics over steady state, one rule per kind of quantity (``catalog.from_lines`` names the
metrics read from iteration-line fields):

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
usable sample is None. The ROCm launcher's four summary lines are *not* preferred (they use
another warm-up rule); they fill a metric only when the iterations cannot produce it (e.g. no seq
length for tokens/s, or the log tail without iteration lines).

Exact at any length: every statistic comes from counts of distinct values (``Sums``), so memory
grows with the number of distinct printed values (bounded by the printed precision), never with
the step count. Each step counts once (the first line printed for it; Primus prints every step
twice). A step far behind the last one (more than ``ECHO`` steps) starts a new attempt: the
metrics describe the latest attempt.

Printed running averages: a step whose printed time is longer than the wall time since the
previous logged step (the lines' own time stamps, at their resolution, with ``RATIO`` slack) did
not take that long: the number is an average over earlier steps (Primus prints a cumulative
average on its first steps, e.g. 15 624 ms on step 2 of a run whose steps take 750 ms). Such steps
of the first ``PROBE`` steps of an attempt count in no metric (``averaged_steps``); when they
follow the warm-up they also extend it. Only Primus records are probed (the parser hands clocks
for them alone): Megatron-LM prints the average over the log interval, never a cumulative one.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter
from fractions import Fraction
from itertools import compress
from operator import eq, le, ne
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


# --- the streaming sums ---------------------------------------------------------------------------
ECHO = 16  # a step at most this far behind the last one is a late echo, not a restart
PROBE = 16  # steps after an attempt's first whose printed time is checked against the time stamps
RATIO = 1.5  # printed time > RATIO x the wall time since the previous step: not this step's own time
STEP_TIME, TOKENS = "ms", "tokens"  # grammar fields: every iteration line's step time; tokens/s/GPU, derived
# from GBS x seq / step time on lines that print none
_INF = math.inf


def _positive(values: list[float]) -> list[float]:
    total = sum(values)
    if total == total and values and min(values) > 0.0 and max(values) < _INF:
        return values
    return [v for v in values if 0.0 < v < _INF]


def _finite(values: list[float]) -> list[float]:
    total = sum(values)
    if -_INF < total < _INF:
        return values
    return [v for v in values if -_INF < v < _INF]


class Fields:
    """The grammar fields the catalog's line metrics summarise, and how each is kept.

    ``names`` starts with the step time (always read). A field keeps only positive values when
    every metric over it wants them (``Metric.positive_only``), else every finite value.
    """

    def __init__(self, metrics: tuple[catalog.Metric, ...]) -> None:
        self.metrics = metrics
        names = [STEP_TIME] + [m.field for m in metrics if m.field != STEP_TIME]
        self.names: tuple[str, ...] = tuple(dict.fromkeys(names))
        self.positive = tuple(all(m.positive_only for m in metrics if m.field == f) for f in self.names)
        self.tokens = self.names.index(TOKENS) if TOKENS in self.names else None


class Sums:
    """Counts of every distinct value per field over one set of steps.

    Logged values have few decimals, so the distinct values stay few whatever the step count;
    sums are taken exactly (``Fraction``) when a metric is read, so the result does not depend
    on how the log was cut into pieces.
    """

    def __init__(self, fields: Fields) -> None:
        self.fields = fields
        self.values: list[Counter] = [Counter() for _ in fields.names]  # per field: kept value -> count
        self.derive: dict[float, Counter] = {}  # GBS -> step times of steps without logged tokens
        self.count, self.first, self.last = 0, None, None

    def add(self, steps, gbs, *cols) -> None:
        """Columns of equal length, one per ``fields.names`` (``None``: not printed on these lines)."""
        n = len(steps)
        if not n:
            return
        self.count += n
        self.first = steps[0] if self.first is None else self.first
        self.last = steps[-1]
        kept = [None if col is None else _positive(col) if positive else _finite(col)
                for col, positive in zip(cols, self.fields.positive)]
        for counts, values in zip(self.values, kept):
            if values is not None:
                counts.update(values)
        t = self.fields.tokens
        if t is not None:
            times = kept[0] if self.fields.positive[0] else _positive(cols[0])
            good = None if cols[t] is None else kept[t] if self.fields.positive[t] else _positive(cols[t])
            self._derive(cols[0], times, cols[t], good, gbs, n)

    def _derive(self, ms, times, tok, good, gbs, n: int) -> None:
        """Keep the step times of lines without logged tokens, by GBS, for derived tokens/s."""
        if tok is None and len(times) == n and gbs.count(gbs[0]) == n and 0.0 < gbs[0] < _INF:
            self.derive.setdefault(gbs[0], Counter()).update(times)  # the common case, in C
        elif tok is None or len(good) < n:
            rows = zip(ms, gbs) if tok is None else ((m, g) for m, g, t in zip(ms, gbs, tok) if t != t)
            for m, g in rows:
                if 0.0 < m < _INF and 0.0 < g < _INF:
                    self.derive.setdefault(g, Counter())[m] += 1

    def metrics(self, seq_length: int | None, world_size: int | None) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        names = self.fields.names
        for metric in self.fields.metrics:
            i = names.index(metric.field)
            counts = self.values[i]
            if metric.positive_only and not self.fields.positive[i]:
                counts = Counter({v: c for v, c in counts.items() if v > 0.0})
            derive = self.derive if i == self.fields.tokens and seq_length and world_size else {}
            out[metric.name] = _STATISTICS[metric.statistic](counts, derive, seq_length, world_size)
        return out


def _mean(counts: Counter, *_) -> float | None:
    n = sum(counts.values())
    return float(_total(counts) / n) if n else None


def _harmonic_mean(counts: Counter, derive: dict[float, Counter], seq_length, world_size) -> float | None:
    n, inv = _reciprocals(counts)
    if derive:  # 1 / (GBS x seq x 1000 / (ms x world)) per step without logged tokens
        scale = Fraction(world_size, seq_length * 1000)
        for g, times in derive.items():
            n += sum(times.values())
            inv += _total(times) / Fraction(g) * scale
    return float(n / inv) if n else None


def _percentile(q: float):
    def statistic(counts: Counter, *_) -> float | None:
        items = sorted(counts.items())
        return percentile_of_counts(items, sum(c for _, c in items), q)
    return statistic


_STATISTICS = {catalog.MEAN: _mean, catalog.HARMONIC_MEAN: _harmonic_mean,
               catalog.P50: _percentile(50.0), catalog.P95: _percentile(95.0)}


def _total(counts: Counter) -> Fraction:
    return sum((Fraction(v) * c for v, c in counts.items()), Fraction(0))


def _reciprocals(counts: Counter) -> tuple[int, Fraction]:
    return sum(counts.values()), sum((c / Fraction(v) for v, c in counts.items()), Fraction(0))


class RunStats:
    """Feeds rows in log order into first-step / warm-up / steady sums of the latest attempt."""

    def __init__(self) -> None:
        self.fields = Fields(catalog.from_lines())
        self.restarts = 0
        self.counted = 0  # steps counted, all attempts
        self._reset()

    def _reset(self) -> None:
        self.start: int | None = None
        self.cutoff: int | None = None
        self.last: int | None = None
        self.first, self.warm, self.steady = Sums(self.fields), Sums(self.fields), Sums(self.fields)
        self.averaged: list[int] = []  # steps whose printed time is a running average (see module doc)
        self._clock: tuple[int, float, float] | None = None  # (step, seconds, resolution) of the last probed line

    def probing(self, steps) -> bool:
        """Whether lines with these steps need their time stamps (``add``'s ``clocks``)."""
        return (self.start is None or steps[0] <= self.start + PROBE
                or (self.last is not None and min(steps) < self.last - ECHO))

    def add(self, steps, totals, gbs, fields, clocks=None) -> None:
        """Columns of one group of lines in log order: ``fields`` holds one per ``self.fields.names``
        (``None`` for a field not printed); ``clocks``: (seconds, resolution) per line, needed while ``probing``."""
        cols = [steps, totals, gbs, clocks, *fields]
        if len(steps) > 1 and any(map(eq, steps[1:], steps[:-1])):  # a step printed twice in a row
            first = [True] + list(map(ne, steps[1:], steps[:-1]))
            cols = [None if c is None else list(compress(c, first)) for c in cols]
            steps = cols[0]
        n = len(steps)
        bounds = [0] + list(compress(range(1, n), map(le, steps[1:], steps[:-1]))) + [n]
        for a, b in zip(bounds, bounds[1:]):  # runs of strictly increasing steps
            i = a
            while i < b and self.last is not None and steps[i] <= self.last:
                if steps[i] < self.last - ECHO:  # far behind: the log holds a restarted run
                    self.restarts += 1
                    self._reset()
                    break
                i += 1  # a repeated or late step: counted once already
            if i < b:
                self._add_sorted(cols, i, b)

    def _add_sorted(self, cols, i: int, j: int) -> None:
        steps, totals, _, clocks, ms = cols[:5]
        i0 = i
        kept = [cols[0], cols[2], *cols[4:]]  # what ``Sums.add`` takes: steps, GBS, the fields
        if self.start is None:
            self.start = steps[i]
            self.cutoff = warmup_cutoff(totals[i], None, steps[i])
            self.first.add(*_cut(kept, i, i + 1))
            i += 1
        averaged = self._averaged(steps, ms, clocks, i0, j) if clocks is not None else []
        for k in averaged:  # a running average right after the warm-up extends it
            if steps[k] == self.cutoff + 1:
                self.cutoff += 1
        mid = max(i, min(j, bisect_right(steps, self.cutoff, i, j)))
        for sums, a, b in ((self.warm, i, mid), (self.steady, mid, j)):
            if averaged and a < b and averaged[-1] >= a and averaged[0] < b:
                sums.add(*_pick(kept, [k for k in range(a, b) if k not in averaged]))
            else:
                sums.add(*_cut(kept, a, b))
        self.averaged.extend(steps[k] for k in averaged)
        self.last = steps[j - 1]
        self.counted += j - i0

    def _averaged(self, steps, ms, clocks, i: int, j: int) -> list[int]:
        """Rows of ``i..j`` within the probe whose printed time exceeds the wall time since the line before."""
        found = []
        for k in range(i, j):
            if steps[k] > self.start + PROBE:
                break
            seconds, resolution = clocks[k]
            if seconds != seconds:
                continue
            before, self._clock = self._clock, (steps[k], seconds, resolution)
            if before is None:
                continue
            wall_ms = (seconds - before[1] + max(resolution, before[2])) * 1000.0
            if wall_ms > 0.0 and ms[k] * (steps[k] - before[0]) > RATIO * wall_ms:
                found.append(k)
        return found

    def basis(self) -> tuple[str, Sums]:
        """Which steps the metrics use: ``steady``, ``after_first_step`` or ``first_step``."""
        if self.steady.count:
            return "steady", self.steady
        if self.warm.count:
            return "after_first_step", self.warm
        return "first_step", self.first

    def metrics(self, seq_length: int | None, world_size: int | None) -> dict[str, float | None]:
        return self.basis()[1].metrics(seq_length, world_size)

    def describe(self) -> dict:
        name, sums = self.basis()
        return {"basis": name, "first_step": sums.first, "last_step": sums.last, "count": sums.count,
                "warmup_cutoff": self.cutoff, "averaged_steps": list(self.averaged), "restarts": self.restarts}


def _cut(cols, i: int, j: int):
    return [None if c is None else c[i:j] for c in cols]


def _pick(cols, rows: list[int]):
    return [None if c is None else [c[k] for k in rows] for c in cols]
