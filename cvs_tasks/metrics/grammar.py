"""The iteration-line grammar: one head pattern and one label table per dialect.

Every dialect prints Megatron's core line ``iteration N/T | label: value | label: value ...``;
they differ in the prefix before ``iteration`` (timestamps, Primus loguru headers, launcher
prefixes such as ``[rank3]:`` or ``0: [default0]:``), in which labels appear and in how a value
is spelled (``X``, ``X/Y``, ``X (avg Y)``, ``.../80.40%``, seconds instead of ms). So a line is
read in two steps: ``HEAD`` finds ``iteration N/T |`` and the rest of the line, and the labels of
the rest are looked up in ``LABELS``. Adding a dialect is a few rows in a table below. These
tables are the source of which label fills which field; the metric catalog (``catalog``) says
which fields a run metric summarises.

Speed: lines of one run share their label sequence, so a window's lines are grouped by it and
each field is converted column-wise (``map`` over a column runs in C); the label sequence is
turned into a *plan* (which position holds which field) once and cached.

What the fields themselves say is read here too (``FieldChecks``): NaN signs and the first and
last printed loss. Megatron prints ``number of nan iterations`` and ``number of skipped
iterations`` per interval, ``grad norm: nan`` when the norm is not finite, and silently omits
``lm loss`` when it is NaN; each is a signature (``signatures.ITERATION_SIGNATURES``). Most windows
carry none of them, which is decided on the text of whole columns (C loops) before any line is
looked at.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter, methodcaller

NAN = math.nan
# Step and planned count have at most 18 digits (< 2**63): a longer number is not an iteration.
HEAD = re.compile(rb"(iteration +(\d{1,18}) */ *(\d{1,18}) *\|)([^\n]*)")
HEAD_GROUPS = 4  # head text, step, planned count, rest of the line

# --- label tables: label as printed (lower case) -> (field, how the value is written) ----------
NUMBER, PAIR, SECONDS, RATIO_PERCENT = "number", "pair", "seconds", "ratio_percent"
MEGATRON = {  # upstream Megatron-LM (docs/log_formats.md#upstream-megatron-lm)
    "elapsed time per iteration (ms)": ("ms", PAIR),
    "throughput per gpu (tflop/s/gpu)": ("tflops", PAIR),
    "learning rate": ("lr", NUMBER),
    "global batch size": ("gbs", NUMBER),
    "lm loss": ("loss", NUMBER),
    "grad norm": ("grad_norm", NUMBER),
    "number of skipped iterations": ("skipped", NUMBER),
    "number of nan iterations": ("nan_iters", NUMBER),
}
ROCM_FORK = {"mem usages": ("mem", NUMBER)}  # fraction 0-1 (docs/log_formats.md#rocm-fork)
PRIMUS = {  # legacy trainer and patch generations B1-B3 (docs/log_formats.md#primus); X/Y and "X (avg Y)" pairs
    "compute per gpu (tflop/s/gpu)": ("tflops", PAIR),
    "tokens per gpu (tokens/s/gpu)": ("tokens", PAIR),
    "tokens/s/gpu inst/harmonic mean": ("tokens", PAIR),
    "hip mem usage/free/total/usage_ratio": ("mem", RATIO_PERCENT),
}
DEEPSPEED = {  # Megatron-DeepSpeed / BLOOM: seconds, per-GPU TFLOPs and tgs
    "elapsed time per iteration (s)": ("ms", SECONDS),
    "tflops": ("tflops", NUMBER),
    "tokens per gpu per second (tgs)": ("tokens", NUMBER),
}
DIALECT_LABELS = {"upstream": MEGATRON, "rocm-fork": ROCM_FORK, "primus": PRIMUS, "megatron-deepspeed": DEEPSPEED}
"""Each dialect's own table, named as ``LogParser.flavour`` names the generations (the catalog's view)."""
LABELS = {**MEGATRON, **ROCM_FORK, **PRIMUS, **DEEPSPEED}
# Labels that tell the generation (dialect.py reads them); the key is the feature name.
FEATURE_LABELS = {
    "mem usages": "mem_usages", "hip mem usage/free/total/usage_ratio": "hip",
    "tokens/s/gpu inst/harmonic mean": "tok_harmonic", "tokens per gpu (tokens/s/gpu)": "tok_per_gpu",
    "compute per gpu (tflop/s/gpu)": "tf_compute", "elapsed time per iteration (s)": "deepspeed",
    "tflops": "deepspeed", "samples per second": "deepspeed", "tokens per gpu per second (tgs)": "deepspeed",
}
# Every field a label can fill, in ``iteration.COLUMNS`` order (after step and planned count).
FIELDS = ("ms", "ms_avg", "tflops", "tflops_avg", "tokens", "tokens_avg", "lr", "gbs", "loss",
          "grad_norm", "skipped", "nan_iters", "mem")


def to_float(text) -> float:
    """A printed number (str or bytes), NaN when absent or unreadable; ``nan``/``inf`` stay."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return NAN


def floats(values) -> list[float]:
    values = values if isinstance(values, list) else list(values)
    try:
        return list(map(float, values))  # C loop; almost always succeeds
    except (TypeError, ValueError):
        return list(map(to_float, values))


def read_column(kind: str, values: list[bytes]) -> tuple[list[float], list[float] | None]:
    """(values, backend averages or None) of one field over many lines."""
    if kind == PAIR:  # "X/Y", "X (avg Y)" or "X"
        joined = b"".join(values)
        if b"(avg" in joined:
            values = list(map(methodcaller("replace", b")", b""), map(methodcaller("replace", b"(avg", b"/"), values)))
        elif b"/" not in joined:
            return floats(values), None
        halves = list(map(methodcaller("partition", b"/"), values))
        return floats(map(itemgetter(0), halves)), floats(map(itemgetter(2), halves))
    if kind == SECONDS:
        return [v * 1000.0 for v in floats(values)], None
    if kind == RATIO_PERCENT:
        last = map(itemgetter(2), map(methodcaller("rpartition", b"/"), values))
        return [v / 100.0 for v in floats(map(methodcaller("strip", b"% \r"), last))], None
    return floats(values), None


@dataclass(frozen=True)
class Plan:
    """Where each field sits in a line split by ``split_rest``: (field, part index, kind)."""

    labels: tuple[str, ...]
    fields: tuple[tuple[str, int, str], ...]

    @property
    def is_iteration(self) -> bool:
        return any(field == "ms" for field, _, _ in self.fields)


def split_rest(rest: bytes) -> list[bytes]:
    """``label: value | label: value |`` -> [label, value, label, value, ...] (C speed)."""
    return rest.replace(b": ", b"|").split(b"|")


def tidy_rest(rest: bytes) -> bytes:
    """Keep only segments with exactly one ``": "`` (a MoE or RL segment may hold several, an
    odd one none), so that labels and values alternate after ``split_rest``."""
    return b"|".join(seg for seg in rest.split(b"|") if seg.count(b": ") == 1) + b"|"


_PLANS: dict[tuple[bytes, ...], Plan] = {}


def plan_for(key: tuple[bytes, ...]) -> Plan:
    """The plan for a label sequence (``split_rest(rest)[0::2]``); the first label of a field wins."""
    plan = _PLANS.get(key)
    if plan is None:
        labels = tuple(k.decode("utf-8", "replace").strip().lower() for k in key)
        fields: dict[str, tuple[str, int, str]] = {}
        for i, label in enumerate(labels):
            field, kind = LABELS.get(label, (None, None))
            if field is not None:
                fields.setdefault(field, (field, 2 * i + 1, kind))
        if len(_PLANS) > 512:  # odd lines make odd keys: keep the cache bounded
            _PLANS.clear()
        plan = _PLANS[key] = Plan(labels, tuple(fields.values()))
    return plan


@dataclass
class Rows:
    """Iteration lines of one window that share a plan, as columns (NaN = not printed).

    Fields arrive as text (``raw``: field -> (kind, values)) and are converted to floats only
    when read: the run metrics need a few fields on every line, the curve every field on few.
    """

    plan: Plan
    index: list[int]  # position of each line among the window's HEAD matches
    steps: list[int]
    totals: list[int]
    raw: dict[str, tuple[str, list[bytes]]]
    cols: dict[str, list[float] | None]

    def __len__(self) -> int:
        return len(self.steps)

    def col(self, field: str) -> list[float] | None:
        """The field's floats over these lines; None when it was not printed."""
        if field not in self.cols:
            base = field[:-4] if field.endswith("_avg") else field
            if base in self.raw:
                kind, values = self.raw[base]
                self.cols[base], self.cols[base + "_avg"] = read_column(kind, values)
            self.cols.setdefault(field, None)
        return self.cols[field]

    def text(self, field: str) -> list[bytes] | None:
        return self.raw[field][1] if field in self.raw else None

    def subset(self, positions) -> "Rows":
        """The lines at ``positions`` (sorted indices) as their own ``Rows``."""
        pick = lambda seq: [seq[k] for k in positions]  # noqa: E731
        return Rows(self.plan, pick(self.index), pick(self.steps), pick(self.totals),
                    {f: (kind, pick(values)) for f, (kind, values) in self.raw.items()},
                    {f: None if c is None else pick(c) for f, c in self.cols.items()})


def _uniform(rests: list[bytes]):
    """(plan, values_at) when every line has the first line's labels, else None.

    Then the whole window splits at once: joined with ``|\\n``, line i's k-th part sits at
    ``i * m + k`` (m parts per line), so a field's column is one slice.
    """
    first = split_rest(rests[0])
    m, n = len(first), len(rests)
    tokens = split_rest(b"|\n".join(rests))
    if len(tokens) != n * m:
        return None
    for k in range(0, m - 1, 2):
        expect = b"\n" + first[k] if k == 0 else first[k]
        if tokens[m + k::m].count(expect) != n - 1:
            return None
    return plan_for(tuple(first[0::2])), lambda pos: tokens[pos::m]


def read_matches(steps: list[bytes], totals: list[bytes], rests: list[bytes]) -> tuple[list[Rows], list[int], int]:
    """Group a window's HEAD matches by label sequence and read them.

    Returns (rows, rejected positions, unreadable count). A match without an elapsed-time label
    (``iteration 5/10 | something else``) is rejected: the caller treats that line as ordinary
    text. A line whose step time cannot be read is dropped and counted.
    """
    uniform = _uniform(rests)
    if uniform is not None:
        runs = [(uniform[0], 0, len(rests), uniform[1])]
    else:
        parts = [split_rest(tidy_rest(r)) for r in rests]
        keys = list(map(tuple, map(itemgetter(slice(0, None, 2)), parts)))
        runs, pos = [], 0
        for key, group in groupby(keys):
            n = sum(1 for _ in group)
            chunk = parts[pos:pos + n]
            runs.append((plan_for(key), pos, pos + n, lambda p, c=chunk: list(map(itemgetter(p), c))))
            pos += n
    out: list[Rows] = []
    rejected: list[int] = []
    unreadable = 0
    for plan, start, stop, values_at in runs:
        if not plan.is_iteration:
            rejected.extend(range(start, stop))
            continue
        whole = stop - start == len(steps)
        rows = Rows(plan, list(range(start, stop)), list(map(int, steps if whole else steps[start:stop])),
                    list(map(int, totals if whole else totals[start:stop])),
                    {field: (kind, values_at(pos)) for field, pos, kind in plan.fields}, {})
        ms = rows.col("ms")
        if sum(ms) != sum(ms):  # NaN somewhere: keep the lines whose step time reads
            keep = [k for k, v in enumerate(ms) if v == v]
            unreadable += len(ms) - len(keep)
            rows = rows.subset(keep)
            if not keep:
                continue
        out.append(rows)
    return out, rejected, unreadable


# --- what the fields say: NaN signs, first and last loss -------------------------------------------
class FieldChecks:
    """Reads the fields of each group of iteration lines, in log order."""

    def __init__(self) -> None:
        self.loss_seen = False  # a finite loss was printed: a later line without one lost it to NaN
        self.first_loss: tuple[int, float] | None = None
        self.last_loss: tuple[int, float] | None = None

    def check(self, rows: Rows) -> list[tuple[int, str]]:
        """(line index, iteration signature name) for every line that carries one."""
        self._track_loss(rows)
        if self._quiet(rows):
            self.loss_seen = self.loss_seen or "loss" in rows.raw
            return []
        found = []
        nan_iters, skipped, gn, loss = (rows.col(f) for f in ("nan_iters", "skipped", "grad_norm", "loss"))
        for k in range(len(rows)):
            value = loss[k] if loss is not None else None
            name = None
            if nan_iters is not None and nan_iters[k] > 0:
                name = "nan_iterations"
            elif gn is not None and not math.isfinite(gn[k]):
                name = "grad_norm_not_finite"
            elif value is not None and not math.isfinite(value):
                name = "lm_loss_not_finite"
            elif value is None and self.loss_seen:
                name = "lm_loss_missing"
            elif skipped is not None and skipped[k] > 0:
                name = "skipped_iterations"
            if value is not None and math.isfinite(value):
                self.loss_seen = True
            if name is not None:
                found.append((k, name))
        return found

    def _quiet(self, rows: Rows) -> bool:
        """True when no line can carry an iteration signature (checked on the text, in C)."""
        for field in ("nan_iters", "skipped"):
            text = rows.text(field)
            if text is not None and (text.count(text[0]) != len(text) or to_float(text[0]) != 0):
                return False
        for field in ("grad_norm", "loss"):
            text = rows.text(field)
            if text is not None and b"n" in b"".join(text).lower():  # nan or inf
                return False
        return "loss" in rows.raw or not self.loss_seen

    def _track_loss(self, rows: Rows) -> None:
        text = rows.text("loss")
        if text is None:
            return
        finite = lambda k: math.isfinite(to_float(text[k]))  # noqa: E731
        first = next((k for k in range(len(text)) if finite(k)), None)
        if first is None:
            return
        last = next(k for k in range(len(text) - 1, -1, -1) if finite(k))
        if self.first_loss is None:
            self.first_loss = (rows.steps[first], to_float(text[first]))
        self.last_loss = (rows.steps[last], to_float(text[last]))
