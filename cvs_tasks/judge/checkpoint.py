"""Checkpoint save and resume: step and loss continuity across the two phases.

Rule (docs/product.md#checkpoint-save-and-resume): the resume phase must start at
``last_ckpt + 1`` (``jobs.checkpoint.last_checkpoint_step``) and its first loss may exceed the
loss at ``last_ckpt`` in the save phase by at most ``loss_rtol · |save_loss|`` (a decrease is
always fine). The save and load times are read from the logs by ``metrics.checkpoint``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class CheckpointResult:
    ok: bool
    reason: str
    last_ckpt: int
    expected_first_step: int
    first_resumed_step: int | None
    save_loss: float | None
    resume_loss: float | None
    increase: float | None
    tolerance: float | None


def checkpoint_continuity(save_losses: Mapping[int, float], resume_losses: Mapping[int, float],
                          last_ckpt: int, rtol: float) -> CheckpointResult:
    """Check step and loss continuity across a save and a resume phase (step -> loss maps)."""
    expected = last_ckpt + 1

    def result(ok, reason, first=None, save=None, resume=None, inc=None, tol=None):
        return CheckpointResult(ok, reason, last_ckpt, expected, first, save, resume, inc, tol)

    if rtol is None or rtol < 0:
        return result(False, f"checkpoint.loss_rtol must be >= 0 (got {rtol!r})")
    if not resume_losses:
        return result(False, "the resume phase produced no iteration lines; check that the "
                             "checkpoint directory is shared and loaded")
    first = min(resume_losses)
    if first != expected:
        return result(False, f"resume started at step {first}, expected {expected} "
                             f"(last checkpoint {last_ckpt} + 1)", first)
    save, resume = save_losses.get(last_ckpt), resume_losses.get(first)
    if save is None or resume is None or save != save or resume != resume:
        which = "save phase at step %d" % last_ckpt if save is None or save != save else \
            "resume phase at step %d" % first
        return result(False, f"no loss logged in the {which}", first, save, resume)
    tol = rtol * max(abs(save), 1e-9)
    inc = resume - save
    if inc > tol:
        return result(False, f"loss rose from {save:.6g} to {resume:.6g} across the resume "
                             f"(+{inc:.4g} > tolerance {tol:.4g})", first, save, resume, inc, tol)
    return result(True, f"resumed at step {first}; loss {save:.6g} -> {resume:.6g} "
                        f"(change {inc:+.4g}, tolerance {tol:.4g})", first, save, resume, inc, tol)
