"""From the string fields of many iteration lines to typed columns, and what they say of the dialect.

Both iteration paths (``ITERATION_RE`` and the per-shape regex) hand over string columns named
after ``ITERATION_RE``'s groups (None = not printed). Conversions run as ``map``/``array`` C loops
over whole columns; only mixed columns fall back to per-item Python.
"""

from __future__ import annotations

from array import array
from itertools import repeat
from operator import add, itemgetter, mul, truediv

from cvs_tasks.metrics.iteration import COL, minute_epoch, timestamp_seconds, to_float
from cvs_tasks.metrics.store import nan_column

_HOUR, _MINUTES, _SECONDS = itemgetter(slice(0, 13)), itemgetter(slice(14, 16)), itemgetter(slice(17, None))


def floats(col: list, n: int) -> array:
    """Strings (or None for "not printed") -> float64 array, NaN for missing or unreadable."""
    if n and col[0] is None and col.count(None) == n:
        return nan_column(n)
    try:
        return array("d", map(float, col))
    except (TypeError, ValueError):
        return array("d", map(to_float, col))


def first_present(present: list[array], n: int) -> array:
    """Per position, the first non-NaN value of the columns that were printed at all."""
    if not present:
        return nan_column(n)
    out = present[0]
    for other in present[1:]:
        out = array("d", [x if x == x else y for x, y in zip(out, other)])
    return out


def timestamps(col: list, n: int) -> array:
    """``YYYY-MM-DD HH:MM:SS(.f)`` strings -> unix seconds, with one calendar call per hour."""
    if not n or (col[0] is None and col.count(None) == n):
        return nan_column(n)
    if None in col:
        return array("d", map(timestamp_seconds, col))
    hours = list(map(_HOUR, col))
    cache = {h: minute_epoch(h + ":00") for h in set(hours)}
    try:
        minutes = map(mul, map(float, map(_MINUTES, col)), repeat(60.0))
        return array("d", map(add, map(add, map(cache.__getitem__, hours), minutes),
                              map(float, map(_SECONDS, col))))
    except ValueError:
        return array("d", map(timestamp_seconds, col))


def typed_columns(c, n: int) -> list:
    f = lambda name: floats(c(name), n)  # noqa: E731
    present = lambda name: c(name).count(None) != n  # noqa: E731
    hips = [array("d", map(truediv, f(h), repeat(100.0))) for h in ("hip1", "hip2") if present(h)]
    mems = [f(m) for m in ("mem1", "mem2") if present(m)]
    tf_avgs = [f(a) for a in ("tf_avg", "tf_avg2") if present(a)]
    columns: list = [None] * len(COL)
    for column, group in (("total", "total"), ("elapsed_ms", "ms"), ("elapsed_avg_ms", "ms_avg"),
                          ("tflops", "tf"), ("tokens_per_gpu", "tok"), ("tokens_avg", "tok_avg"),
                          ("lr", "lr"), ("global_batch_size", "gbs"), ("loss", "loss"),
                          ("grad_norm", "gn"), ("skipped", "skip"), ("nan_iters", "nan")):
        columns[COL[column]] = f(group)
    columns[COL["tflops_avg"]] = first_present(tf_avgs, n)
    columns[COL["mem_ratio"]] = first_present(mems + hips, n)
    columns[COL["timestamp"]] = timestamps(c("ts"), n)
    return columns


def note_columns(features: set[str], c, n: int) -> None:
    f = features
    f.add("iterations")
    checks = {
        "pairs": lambda: c("ms_avg").count(None) != n,
        "tok_harmonic": lambda: c("tokh").count(None) != n,
        "tok_per_gpu": lambda: c("tokh").count(None) > c("tok").count(None),
        "tf_avg_form": lambda: c("tf_avg2").count(None) != n,
        "tf_compute": lambda: c("tflabel").count("compute") > 0,
        "hip": lambda: c("hip1").count(None) != n or c("hip2").count(None) != n,
        "mem_usages": lambda: c("mem1").count(None) != n or c("mem2").count(None) != n,
        # a stamp has at most one "." (before the microseconds): count them in C, not per row
        "ts_us": lambda: "".join(filter(None, c("ts"))).count(".") > 0,
        "ts_s": lambda: "".join(filter(None, c("ts"))).count(".") < n - c("ts").count(None),
        "no_ts": lambda: c("ts").count(None) > 0,
        "rank_prefix": lambda: "rank-" in "".join(filter(None, c("prefix"))),
    }
    for name, check in checks.items():
        if name not in f and check():
            f.add(name)

def note_line(features: set[str], line: str) -> None:
    f = features
    f.add("iterations")
    low = line.lower()
    for name, needle in (("tok_harmonic", "tokens/s/gpu inst/harmonic mean"),
                         ("tok_per_gpu", "tokens per gpu (tokens/s/gpu)"),
                         ("tf_compute", "compute per gpu"), ("tf_avg_form", "(avg "),
                         ("hip", "hip mem usage"), ("mem_usages", "mem usages:"),
                         ("rank_prefix", "][rank-")):
        if needle in low:
            f.add(name)
    if "elapsed time per iteration (ms): " in low and "/" in low.split(
            "elapsed time per iteration (ms): ", 1)[1].split("|", 1)[0]:
        f.add("pairs")


PRIMUS_FEATURES = frozenset({"pairs", "tok_harmonic", "tok_per_gpu", "tf_compute", "hip", "rank_prefix"})


def detect_dialect(features: set[str], facts) -> str | None:
    """``primus`` on any Primus evidence, ``megatron`` on any other Megatron line, else None."""
    if facts.primus_evidence or features & PRIMUS_FEATURES:
        return "primus"
    if "iterations" in features or facts.args or facts.launcher_summary:
        return "megatron"
    return None


def flavour_of(dialect: str | None, features: set[str], facts) -> str | None:
    """upstream | rocm-fork | primus-legacy | primus-b1 | primus-b2 | primus-b3 | primus."""
    f = features
    if dialect == "primus":
        if "tok_harmonic" in f:
            return "primus-b3" if f & {"tf_avg_form", "tf_compute"} else "primus-b2"
        if "tok_per_gpu" in f:
            return "primus-b1" if f & {"ts_us", "ts_s"} else "primus-legacy"
        return "primus"
    if dialect == "megatron":
        return "rocm-fork" if "mem_usages" in f or facts.launcher_summary else "upstream"
    return None
