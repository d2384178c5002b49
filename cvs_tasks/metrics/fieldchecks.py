"""What the iteration fields themselves say: NaN signs and the first and last printed loss.

Megatron prints ``number of nan iterations`` and ``number of skipped iterations`` per interval,
``grad norm: nan`` when the norm is not finite, and silently omits ``lm loss`` when it is NaN;
each is a signature (``signatures.ITERATION_SIGNATURES``). Most windows carry none of them, which
is decided on the text of whole columns (C loops) before any line is looked at.
"""

from __future__ import annotations

import math

from cvs_tasks.metrics.grammar import Rows, to_float


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
