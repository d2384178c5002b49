"""Fast path for the common case: iteration lines that all have the shape of the last one seen.

A run prints the same segments on every line. The general ``ITERATION_RE`` pays for every
optional segment on every line; a regex built for one *shape* (the ordered segment labels of a
line) only matches literals and is about twice as fast. Its groups carry the same names as
``ITERATION_RE``'s, so both feed the same column code. A window holding an iteration line of
another shape goes through the general pattern, which then learns the new shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FIELD = {  # exact label -> column kind
    "elapsed time per iteration (ms)": "ms",
    "throughput per GPU (TFLOP/s/GPU)": "tf",
    "compute per GPU (TFLOP/s/GPU)": "tf",
    "tokens per GPU (tokens/s/GPU)": "tok",
    "tokens/s/GPU inst/harmonic mean": "tok",
    "learning rate": "lr",
    "global batch size": "gbs",
    "lm loss": "loss",
    "grad norm": "gn",
    "number of skipped iterations": "skip",
    "number of nan iterations": "nan",
    "mem usages": "mem1",
    "hip mem usage/free/total/usage_ratio": "hip1",
}
_IGNORED = {"consumed samples", "loss scale", "decoupled learning rate", "num zeros",
            "params norm", "skipped samples", "energy per GPU (J/iter/GPU)", "power per GPU (W/GPU)",
            "rocm mem usage/free/total/usage_ratio", "seq_length"}
_HEAD_RE = re.compile(
    r"(?:\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?)\] ?)? ?iteration +(\d+) */ *(\d+)$", re.M)
_RANK_MAX_RE = re.compile(r"^rank-\d+(?: rocm)? max mem usage/usage_ratio$")


@dataclass(frozen=True)
class Shape:
    head: int  # tokens before "consumed samples"
    labels: tuple[tuple[int, str], ...]  # (token index, label)
    fields: tuple[tuple[int, str], ...]  # (value token index, column kind)
    width: int  # tokens per line


def _tokens(text: str) -> list[str]:
    return text.replace(" |\n", "\n").replace(": ", " | ").replace("\n", " | ").split(" | ")


def learn_shape(line: str) -> Shape | None:
    """The shape of one iteration line, or None when it holds a label we do not know."""
    if "\r" in line or "\n" in line:
        return None
    tokens = _tokens(line + "\n")[:-1]
    try:
        head = tokens.index("consumed samples")
    except ValueError:
        return None
    if "iteration" not in tokens[head - 1] if head else True:
        return None
    body = tokens[head:]
    if len(body) % 2:
        return None
    labels, fields = [], []
    for k in range(0, len(body), 2):
        label = body[k].strip()
        if body[k] != label:
            return None
        if label in _FIELD:
            if any(kind == _FIELD[label] for _, kind in fields):
                return None  # e.g. a memory segment before and after the counters: general regex
            fields.append((head + k + 1, _FIELD[label]))
        elif label not in _IGNORED and not _RANK_MAX_RE.match(label):
            return None
        labels.append((head + k, label))
    return Shape(head, tuple(labels), tuple(fields), len(tokens))


_VALUE = r"([^ |\n]*)"
_PAIR = r"([^ |/\n]*)(?:/([^ |\n]*))?"


def shape_regex(shape: Shape) -> tuple[re.Pattern, dict[str, str]]:
    """A regex for exactly this shape (group names as in ``ITERATION_RE``) and constant columns.

    The labels are literal, so a line of another shape does not match and stays in the text
    between matches, where the caller notices it.
    """
    parts = [r"^(?P<prefix>[^\n]*?)(?:\[(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?)\] ?)?"
             r" ?iteration +(?P<step>\d+) */ *(?P<total>\d+)"]
    constants: dict[str, str] = {}
    kinds = dict((index - 1, kind) for index, kind in shape.fields)
    for index, label in shape.labels:
        kind = kinds.get(index)
        parts.append(r" *\| " + re.escape(label) + r": *")
        if kind in ("ms", "tok"):
            parts.append(_PAIR.replace("(", f"(?P<{kind}>", 1).replace("/(", f"/(?P<{kind}_avg>", 1))
            if label == "tokens/s/GPU inst/harmonic mean":
                constants["tokh"] = label
        elif kind == "tf":
            constants["tflabel"] = label.split(" ", 1)[0]
            parts.append(r"(?P<tf>[^ |/\n]*)(?:/(?P<tf_avg>[^ |\n]*)| \(avg (?P<tf_avg2>[^)\n]*)\))?")
        elif kind == "hip1":
            parts.append(r"[^|\n]*?/(?P<hip1>[^/|%\n]*)%")
        elif kind is not None:
            parts.append(_VALUE.replace("(", f"(?P<{kind}>", 1))
        else:
            parts.append(r"[^|\n]*")  # greedy: gives back the blanks before the bar (cheaper than lazy)
    parts.append(r" *\|? *\n")
    return re.compile("".join(parts), re.MULTILINE), constants


_LEAN_NUMBER = r"[-+0-9.eE]+"  # no n/N: a nan or inf loss or grad norm never matches


def lean_regex(line: str, shape: Shape) -> re.Pattern | None:
    """A cheaper regex for the shape of ``line`` that captures only what the run metrics need.

    Groups: step, ms, tf, tok, mem1 (those the shape has). It follows the learned line's exact
    spacing (Megatron prints ``label: value |`` with one blank before the bar and pads only
    integers), which is what makes it cheap. Everything that would need a closer look does
    *not* match: non-zero skipped/NaN counters, a loss or grad norm that is not a plain number,
    another global batch size, prefix, spacing or timestamp form. Such a line is left between
    matches, where the caller sees it. No class in it matches a newline, so a match is exactly
    one line. None when the shape is not a plain Megatron one (prefix other than blanks, X/Y or
    "(avg" pairs, hip memory, no loss, counters or batch size).
    """
    from cvs_tasks.metrics.iteration import ITERATION_RE

    m = ITERATION_RE.fullmatch(line + "\n")
    if m is None or (m["prefix"] or "").strip(" ") or "\x1b" in line or "  |" in line:
        return None
    if any(m[g] is not None for g in ("ms_avg", "tf_avg", "tf_avg2", "tok_avg", "hip1", "hip2")):
        return None
    kinds = dict((index - 1, kind) for index, kind in shape.fields)
    if not {"loss", "skip", "nan", "gbs"} <= set(kinds.values()) or not m["gbs"]:
        return None
    head = line[: m.start("step")]
    parts = ["^" + re.escape(m["prefix"] or "")]
    if m["ts"] is not None:
        fraction = r"\.[^\]\n]*" if "." in m["ts"] else ""
        parts.append(r"\[[^\].\n]*" + fraction + r"\]")
        head = line[m.end("ts") + 1: m.start("step")]
    else:
        head = head[len(m["prefix"] or ""):]
    parts.append(re.escape(head.rstrip(" ")) + r" +(?P<step>\d+)")
    parts.append("/ *" if line[m.end("step")] == "/" else " */ *")
    parts.append(r"\d+")
    tokens = _tokens(line + "\n")[:-1]
    for index, label in shape.labels:
        kind = kinds.get(index)
        padded = index + 1 < len(tokens) and tokens[index + 1].startswith(" ")
        parts.append(r" \| " + re.escape(label) + (": +" if padded else ": "))
        if kind in ("ms", "tf", "tok", "mem1"):
            parts.append(f"(?P<{kind}>[^ |\\n]*)")
        elif kind in ("loss", "gn"):
            parts.append(_LEAN_NUMBER)
        elif kind in ("skip", "nan"):
            parts.append("0")
        elif kind == "gbs":
            parts.append(re.escape(m["gbs"]))
        elif kind == "lr" or padded:
            parts.append(r"[^ |\n]*")
        else:
            parts.append(r"[^|\n]*")
    parts.append(r" \|\n" if line.endswith(" |") else r"\n")
    return re.compile("".join(parts), re.MULTILINE)
