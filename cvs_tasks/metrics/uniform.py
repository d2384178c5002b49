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
            parts.append(r"[^|\n]*?")
    parts.append(r" *\|? *\n")
    return re.compile("".join(parts), re.MULTILINE), constants
