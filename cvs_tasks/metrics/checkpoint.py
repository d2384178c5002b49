"""Checkpoint save/resume checks: step continuity, loss continuity and I/O times.

Continuity (product document "Checkpoint save and resume"): the resume phase must start at
``last_ckpt + 1`` and its first loss may exceed the loss at ``last_ckpt`` in the save phase by at
most ``loss_rtol · |save_loss|`` (a decrease is always fine).

I/O times come from the checkpoint messages (log_formats.md §1.7): saves are timed per iteration
from ``saving checkpoint at iteration N`` to ``successfully saved checkpoint from iteration N``;
the load from ``loading [distributed ]checkpoint from`` (or ``loading release ... checkpoint``) to
``successfully loaded checkpoint from``. Each line's time is the most precise stamp on it: the
Megatron ``[YYYY-MM-DD HH:MM:SS(.f)]`` stamp, else the Primus logger's ``[YYYYMMDD HH:MM:SS]``.
When the load lines carry no stamp, the ``load-checkpoint`` timer (max across ranks) is used.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from cvs_tasks.metrics.iteration import timestamp_seconds
from cvs_tasks.metrics.signatures import clean


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


def last_checkpoint_step(save_iters: int, save_interval: int) -> int:
    """The last step a save phase of ``save_iters`` steps checkpoints at every ``save_interval``."""
    if save_interval <= 0:
        raise ValueError("checkpoint.save_interval must be > 0")
    return (save_iters // save_interval) * save_interval


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


def losses_by_step(iterations) -> dict[int, float]:
    """step -> loss from a ``LogParser.iterations`` map or a list of Iteration (finite only)."""
    values = iterations.values() if isinstance(iterations, Mapping) else iterations
    return {it.step: it.loss for it in values if it.loss is not None and it.loss == it.loss}


_MEGATRON_TS = re.compile(r"\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?)\]")
_LOGGER_TS = re.compile(r"\[(\d{4})(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\]")
_SAVE_START = re.compile(r"\bsaving checkpoint at iteration\s+(\d+)")
_SAVE_END = re.compile(r"successfully saved checkpoint from iteration\s+(\d+)")
_LOAD_START = re.compile(r"\bloading (?:distributed |release (?:distributed )?)?checkpoint from\b")
_LOAD_END = re.compile(r"successfully loaded checkpoint from")
_LOAD_TIMER = re.compile(r"^\s*load-checkpoint\s*\.*:\s*\(?\s*([\d.]+)(?:,\s*([\d.]+))?")


def line_time(line: str) -> float | None:
    """Unix seconds of the most precise time stamp on a line, or None."""
    m = _MEGATRON_TS.search(line)
    if m:
        return timestamp_seconds(m.group(1))
    m = _LOGGER_TS.search(line)
    if m:
        y, mo, d, h, mi, s = (int(x) for x in m.groups())
        return float(calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)))
    return None


@dataclass
class CheckpointTimes:
    save_times_s: dict[int, float] = field(default_factory=dict)
    load_time_s: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def mean_save_s(self) -> float | None:
        times = list(self.save_times_s.values())
        return sum(times) / len(times) if times else None


def checkpoint_io_times(lines: Iterable[str]) -> CheckpointTimes:
    """Save time per iteration and the load time, in seconds, from a log's lines."""
    out = CheckpointTimes()
    save_start: dict[int, float] = {}
    load_start = load_end = timer = None
    saw_load = False
    for raw in lines:
        if "checkpoint" not in raw:
            continue
        line = clean(raw)
        if m := _SAVE_START.search(line):
            if (t := line_time(line)) is not None:
                save_start[int(m.group(1))] = t
        elif m := _SAVE_END.search(line):
            step, t = int(m.group(1)), line_time(line)
            if t is not None and step in save_start:
                out.save_times_s[step] = round(t - save_start[step], 6)
        elif _LOAD_END.search(line):
            load_end = line_time(line)
        elif _LOAD_START.search(line):
            saw_load = True
            load_start = line_time(line)
        elif m := _LOAD_TIMER.match(line):
            timer = float(m.group(2) or m.group(1)) / 1000.0
    if load_start is not None and load_end is not None:
        out.load_time_s = round(load_end - load_start, 6)
    elif timer is not None:
        out.load_time_s = timer
        out.notes.append("load time from the load-checkpoint timer (max across ranks)")
    elif saw_load:
        out.notes.append("load lines carry no time stamp; load time unknown")
    else:
        out.notes.append("no checkpoint load lines found")
    if save_start and not out.save_times_s:
        out.notes.append("save start lines found but no matching 'successfully saved' lines")
    return out
