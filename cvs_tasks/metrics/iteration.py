"""One training iteration as the log reports it, and the two ways a line becomes one.

Every dialect prints the same Megatron core line (``iteration N/T | label: value | ...``); they
differ in the prefix (timestamp with or without microseconds, Primus loguru header with ANSI
colours), in extra segments (ROCm ``mem usages:``, Primus ``hip mem usage...``), in X/Y or
``X (avg Y)`` pairs and in the tokens label. ``ITERATION_RE`` knows every shape in log_formats.md
in the order Megatron prints segments, so the parser can run it over a whole chunk with
``re.split`` and get the fields as columns without a Python loop per line. A line it does not
know (new segment, interleaved output) falls back to ``parse_iteration_line``, which reads any
``label: value`` order.

A row is a tuple in ``COLUMNS`` order with NaN for "not printed"; ``Iteration`` is the public,
None-for-missing form built from a row.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

NAN = float("nan")

COLUMNS: tuple[str, ...] = (
    "step", "total", "elapsed_ms", "elapsed_avg_ms", "tflops", "tflops_avg", "tokens_per_gpu",
    "tokens_avg", "lr", "global_batch_size", "loss", "grad_norm", "skipped", "nan_iters",
    "mem_ratio", "timestamp",
)
COL = {name: i for i, name in enumerate(COLUMNS)}


@dataclass(frozen=True)
class Iteration:
    """One logged iteration; None means the line did not carry the field.

    ``tokens_per_gpu`` is the logged value, or GBS*seq/(s*world) when the log prints none and
    seq length and world size are known. ``tflops_avg``/``tokens_avg`` are the backend's own
    running averages (Primus Y of X/Y), kept for display only. ``mem_ratio`` is 0-1 (ROCm
    ``mem usages:`` or Primus hip ``usage_ratio`` % / 100). ``timestamp`` is unix seconds of the
    Megatron ``[YYYY-MM-DD HH:MM:SS(.f)]`` stamp, read as UTC.
    """

    step: int
    total: int | None
    elapsed_ms: float | None
    tflops: float | None
    tflops_avg: float | None
    tokens_per_gpu: float | None
    tokens_avg: float | None
    lr: float | None
    loss: float | None
    grad_norm: float | None
    skipped: int | None
    nan_iters: int | None
    mem_ratio: float | None
    timestamp: float | None
    global_batch_size: int | None = None
    elapsed_avg_ms: float | None = None


def _opt(x: float) -> float | None:
    return None if x != x else x


def _opt_int(x: float) -> int | None:
    return None if x != x or math.isinf(x) else int(x)


def iteration_from_row(row, tokens_derived: float | None = None) -> Iteration:
    """Build the public record from a stored row; ``tokens_derived`` fills a missing tokens value."""
    tokens = _opt(row[6])
    if tokens is None:
        tokens = tokens_derived
    return Iteration(
        step=int(row[0]), total=_opt_int(row[1]), elapsed_ms=_opt(row[2]), tflops=_opt(row[4]),
        tflops_avg=_opt(row[5]), tokens_per_gpu=tokens, tokens_avg=_opt(row[7]), lr=_opt(row[8]),
        loss=_opt(row[10]), grad_norm=_opt(row[11]), skipped=_opt_int(row[12]),
        nan_iters=_opt_int(row[13]), mem_ratio=_opt(row[14]), timestamp=_opt(row[15]),
        global_batch_size=_opt_int(row[9]), elapsed_avg_ms=_opt(row[3]),
    )


# --- fast path: one regex for every known line shape --------------------------------------------
_NUM = r"([\w.+-]+)"
_MEM_TAIL = r"(?:\ *(?:rocm|rank-\d+(?:\ rocm)?\ max)\ mem\ usage[^|\n]*\|)*"
ITERATION_RE = re.compile(
    rf"""^(?P<prefix>[^\n]*?)
    (?:\[(?P<ts>\d{{4}}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?)\]\ ?)?
    \ ?iteration\ +(?P<step>\d+)\ */\ *(?P<total>\d+)\ +\|
    \ consumed\ samples:\ +\d+\ +\|
    (?:\ skipped\ samples:\ +\d+\ +\|)?
    \ elapsed\ time\ per\ iteration\ \(ms\):\ (?P<ms>{_NUM[1:-1]})(?:/(?P<ms_avg>{_NUM[1:-1]}))?\ +\|
    (?:\ (?:mem\ usages:\ (?P<mem1>{_NUM[1:-1]})
         |hip\ mem\ usage/free/total/usage_ratio:\ [^|\n]*?/(?P<hip1>{_NUM[1:-1]})%)\ *\|{_MEM_TAIL})?
    (?:\ (?P<tflabel>throughput|compute)\ per\ GPU\ \(TFLOP/s/GPU\):\ (?P<tf>{_NUM[1:-1]})
         (?:/(?P<tf_avg>{_NUM[1:-1]})|\ \(avg\ (?P<tf_avg2>{_NUM[1:-1]})\))?\ +\|)?
    (?:\ (?:tokens\ per\ GPU\ \(tokens/s/GPU\)|(?P<tokh>tokens/s/GPU\ inst/harmonic\ mean)):
         \ (?P<tok>{_NUM[1:-1]})(?:/(?P<tok_avg>{_NUM[1:-1]}))?\ +\|(?:\ seq_length:\ +\d+\ +\|)?)?
    (?:\ energy\ per\ GPU\ \(J/iter/GPU\):\ [^|\n]*\|\ power\ per\ GPU\ \(W/GPU\):\ [^|\n]*\|)?
    (?:\ learning\ rate:\ (?P<lr>{_NUM[1:-1]})\ +\|)?
    (?:\ decoupled\ learning\ rate:\ [^|\n]*\|)?
    \ global\ batch\ size:\ +(?P<gbs>\d+)\ +\|
    (?:\ lm\ loss:\ (?P<loss>{_NUM[1:-1]})\ +\|)?
    (?:\ (?!loss\ scale:)[^|\n]*\|)*?
    \ loss\ scale:\ [^|\n]*\|
    (?:\ grad\ norm:\ (?P<gn>{_NUM[1:-1]})\ +\|)?
    (?:\ num\ zeros:\ [^|\n]*\|)?
    (?:\ params\ norm:\ [^|\n]*\|)?
    \ number\ of\ skipped\ iterations:\ +(?P<skip>\d+)\ +\|
    \ number\ of\ nan\ iterations:\ +(?P<nan>\d+)
    (?:\ +\|\ (?:mem\ usages:\ (?P<mem2>{_NUM[1:-1]})
         |hip\ mem\ usage/free/total/usage_ratio:\ [^|\n]*?/(?P<hip2>{_NUM[1:-1]})%))?
    (?:\ +\|\ *(?:rocm|rank-\d+(?:\ rocm)?\ max)\ mem\ usage[^|\n]*)*
    \ *\|?[ \t\r]*\n""",
    re.MULTILINE | re.VERBOSE,
)
GROUPS = ITERATION_RE.groupindex  # name -> 1-based group number
STRIDE = ITERATION_RE.groups + 1  # re.split yields [other, g1..gN, other, ...]

# --- slow path: any label order ---------------------------------------------------------------
_HEAD_RE = re.compile(
    r"(?:\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?)\]\s*)?\biteration\s+(\d+)\s*/\s*(\d+)\s*\|"
)
_PAIR_RE = re.compile(r"^\s*([^\s/(]+)\s*(?:/\s*([^\s/(]+)|\(avg\s+([^\s)]+)\))?")
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_LABEL_FIELD = {
    "elapsed time per iteration (ms)": "ms",
    "throughput per gpu (tflop/s/gpu)": "tf",
    "compute per gpu (tflop/s/gpu)": "tf",
    "tokens per gpu (tokens/s/gpu)": "tok",
    "tokens/s/gpu inst/harmonic mean": "tok",
    "learning rate": "lr",
    "global batch size": "gbs",
    "lm loss": "loss",
    "grad norm": "gn",
    "number of skipped iterations": "skip",
    "number of nan iterations": "nan",
    "mem usages": "mem",
    "hip mem usage/free/total/usage_ratio": "hip",
}


def to_float(text: str | None) -> float:
    """A logged number, NaN when absent or unreadable (``nan``/``inf`` stay what they say)."""
    if text is None:
        return NAN
    try:
        return float(text)
    except ValueError:
        return NAN


def parse_iteration_line(line: str) -> tuple | None:
    """Slow path: a row from any iteration line (ANSI already stripped), None if it is not one.

    Needs ``iteration N/T |`` and an ``elapsed time per iteration (ms)`` segment; validation
    lines, memory reports and the ROCm summary lines therefore never become iterations.
    """
    head = _HEAD_RE.search(line)
    if head is None or "elapsed time per iteration (ms)" not in line:
        return None
    ts_text, step, total = head.groups()
    if ts_text is None:  # Megatron stamp may sit before a launcher prefix: look left of the match
        left = re.findall(r"\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?)\]", line[: head.start()])
        ts_text = left[-1] if left else None
    values: dict[str, tuple[float, float]] = {}
    for segment in line[head.end():].split("|"):
        label, sep, value = segment.partition(": ")
        if not sep:
            continue
        field = _LABEL_FIELD.get(label.strip().lower())
        if field is None or field in values:
            continue
        if field == "hip":
            pct = value.strip().rsplit("/", 1)[-1].rstrip("%")
            values[field] = (to_float(pct) / 100.0, NAN)
            continue
        pair = _PAIR_RE.match(value)
        if pair is None:
            continue
        first, second, avg = pair.groups()
        values[field] = (to_float(first), to_float(second if second is not None else avg))
    if "ms" not in values:
        return None
    get = lambda name, i=0: values.get(name, (NAN, NAN))[i]  # noqa: E731
    mem = get("mem") if "mem" in values else get("hip")
    return (
        int(step), float(total), get("ms"), get("ms", 1), get("tf"), get("tf", 1), get("tok"),
        get("tok", 1), get("lr"), get("gbs"), get("loss"), get("gn"), get("skip"), get("nan"),
        mem, timestamp_seconds(ts_text),
    )


_MINUTE_CACHE: dict[str, float] = {}


def minute_epoch(prefix: str) -> float:
    """Unix seconds of ``YYYY-MM-DD HH:MM`` (UTC), cached: consecutive lines share the minute."""
    value = _MINUTE_CACHE.get(prefix)
    if value is None:
        if len(_MINUTE_CACHE) > 4096:
            _MINUTE_CACHE.clear()
        import calendar

        try:
            y, mo, d = int(prefix[0:4]), int(prefix[5:7]), int(prefix[8:10])
            h, mi = int(prefix[11:13]), int(prefix[14:16])
            value = float(calendar.timegm((y, mo, d, h, mi, 0, 0, 0, 0)))
        except ValueError:
            value = NAN
        _MINUTE_CACHE[prefix] = value
    return value


def timestamp_seconds(text: str | None) -> float:
    """``YYYY-MM-DD HH:MM:SS(.ffffff)`` -> unix seconds (UTC); NaN when absent."""
    if not text:
        return NAN
    return minute_epoch(text[:16]) + to_float(text[17:])
