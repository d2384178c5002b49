"""The cheapest pass over a window once the log is long enough to be thinned.

Past ``retention.RETAIN`` iterations most rows are only folded into the run-metric sums, so
they need four or five fields, not sixteen. ``uniform.lean_regex`` captures just those; the
few rows the retention rule keeps are found again in the window text and read with the full
shape regex. ``read_window`` is pure: it returns what it found, or None when the window needs
the careful path (another line shape, an iteration line that needs checks, steps out of order).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import compress, islice
from operator import lt, not_

from cvs_tasks.metrics.retention import keep_mask


@dataclass
class LeanWindow:
    steps: list[int]  # every iteration step of the window, in order
    keep: list[bool]  # rows the retention rule keeps
    kept_text: str | bytes  # the kept rows' lines, to be read with the full shape regex
    others: list  # text between iteration lines (str, or bytes for a bytes window)
    fields: dict[str, list]  # the dropped rows' captured fields (logged text)


def _text(block, literal: str):
    """``literal`` in the type of ``block`` (a window is str, or bytes when read from a file)."""
    return literal if isinstance(block, str) else literal.encode("ascii")


def read_window(block, rx: re.Pattern, stride: int, after_step: int) -> LeanWindow | None:
    """Split ``block`` (whole lines, str or bytes) with the lean regex (of the same type); None
    unless every check passes.

    The lean regex cannot run over a line end (no class in it matches a newline) and is anchored
    at line starts, so every match is exactly one line.

    ``after_step``: every step must be larger (the latest step stored or folded so far).
    """
    parts = rx.split(block)
    width = rx.groups + 1
    n = (len(parts) - 1) // width
    if not n:
        return None
    others = parts[0::width]
    between = block[:0].join(others)
    if _text(block, "elapsed time per iteration") in between.lower():
        return None  # an iteration line of another shape, or one that needs checks
    index = rx.groupindex
    steps = list(map(int, parts[index["step"]::width]))
    if steps[0] <= after_step or not all(map(lt, steps, islice(steps, 1, None))):
        return None
    keep = keep_mask(steps, stride)
    lines = lines_of_steps(block, compress(steps, keep), compress(range(n), keep), n)
    if lines is None:
        return None
    drop = list(map(not_, keep))
    fields = {name: list(compress(parts[group::width], drop)) for name, group in index.items()
              if name != "step"}
    return LeanWindow(steps, keep, block[:0].join(lines), others, fields)


def lines_of_steps(block, steps, rows=None, n_rows: int = 0) -> list | None:
    """The lines of ``block`` whose iteration head shows each of ``steps`` (increasing), or None.

    ``rows`` (the row index of each step among ``n_rows`` equally long-ish lines) lets the search
    start near the line instead of scanning the window from the previous hit.
    """
    out: list[str] = []
    pos = 0
    find, rfind = block.find, block.rfind
    per_row = len(block) / n_rows if n_rows else 0.0
    newline, space, head = _text(block, "\n"), _text(block, " "), _text(block, "iteration")
    rows = iter(rows) if rows is not None else None
    for step in steps:
        needle = _text(block, f" {step}/")
        if rows is not None:
            guess = int(next(rows) * per_row)
            pos = max(pos, rfind(newline, 0, max(0, guess - 4096)) + 1)
        while True:
            hit = find(needle, pos)
            if hit == -1:
                return None
            start = rfind(newline, 0, hit) + 1
            if block[start:hit].rstrip(space).endswith(head):
                end = find(newline, hit)
                end = len(block) if end == -1 else end + 1
                out.append(block[start:end])
                pos = end
                break
            pos = hit + 1
    return out
