"""Checkpoint save and load times, read from the checkpoint messages of a log.

The messages: docs/log_formats.md#checkpoint-messages.

Saves are timed per iteration from ``saving checkpoint at iteration N`` to ``successfully saved
checkpoint from iteration N``; the load from ``loading [distributed ]checkpoint from`` (or
``loading release ... checkpoint``) to ``successfully loaded checkpoint from``. Each line's time is
the most precise stamp on it: the Megatron ``[YYYY-MM-DD HH:MM:SS(.f)]`` stamp, else the Primus
logger's ``[YYYYMMDD HH:MM:SS]``. When the load lines carry no stamp, the ``load-checkpoint``
timer (max across ranks) is used.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, field
from typing import Iterable

from cvs_tasks.metrics.iteration import STAMP_RE, timestamp_seconds
from cvs_tasks.metrics.signatures import clean

_LOGGER_TS = re.compile(r"\[(\d{4})(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\]")
_SAVE_START = re.compile(r"\bsaving checkpoint at iteration\s+(\d+)")
_SAVE_END = re.compile(r"successfully saved checkpoint from iteration\s+(\d+)")
_LOAD_START = re.compile(r"\bloading (?:distributed |release (?:distributed )?)?checkpoint from\b")
_LOAD_END = re.compile(r"successfully loaded checkpoint from")
_LOAD_TIMER = re.compile(r"^\s*load-checkpoint\s*\.*:\s*\(?\s*([\d.]+)(?:,\s*([\d.]+))?")


def line_time(line: str) -> float | None:
    """Unix seconds of the most precise time stamp on a line, or None."""
    m = STAMP_RE.search(line)
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
