"""What every benchmark shares: the result row, target checks, CPU clocks and child processes.

A row is a plain dict so the suite can print it as JSON unchanged:
``{"name", "value", "unit", "target", "status": "PASS"|"MISS", "detail"}``. A figure that could
not be measured is a MISS whose detail says why (never a silent skip).
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import time
from typing import Any, Callable

PASS, MISS = "PASS", "MISS"


def row(name: str, value: float | None, unit: str, target: str, ok: bool | None, detail: str = "") -> dict[str, Any]:
    """One figure; ``ok`` None (not measured) counts as a MISS."""
    if isinstance(value, float):
        value = round(value, 3 if abs(value) < 100 else 1)
    return {"name": name, "value": value, "unit": unit, "target": target,
            "status": PASS if ok else MISS, "detail": detail}


def at_most(name: str, value: float | None, limit: float, unit: str, detail: str = "") -> dict[str, Any]:
    ok = None if value is None else value <= limit
    return row(name, value, unit, f"<= {limit:g}", ok, _with_gap(detail, value, limit, "over"))


def at_least(name: str, value: float | None, limit: float, unit: str, detail: str = "") -> dict[str, Any]:
    ok = None if value is None else value >= limit
    return row(name, value, unit, f">= {limit:g}", ok, _with_gap(detail, value, limit, "under"))


def reported(name: str, value: float | None, unit: str, detail: str = "") -> dict[str, Any]:
    """A figure shown for what it is, judged by no target: an absolute time whose target moved to
    a ratio row measured in the same run (docs/measured.md)."""
    return row(name, value, unit, "reported", True, detail)


def ratio(value: float | None, reference: float | None) -> float | None:
    """``value / reference``; None when either is missing or the reference is not positive."""
    if value is None or reference is None or reference <= 0:
        return None
    return value / reference


def least_cpu_seconds(action: Callable[[], Any], passes: int = 3) -> float:
    """The least CPU time of this process that ``action`` took over ``passes`` runs: the cost of a
    reference operation, which a slower or busier machine slows as it slows what it is set against."""
    spent = []
    for _ in range(passes):
        start = time.process_time()
        action()
        spent.append(time.process_time() - start)
    return min(spent)


def not_measured(name: str, unit: str, target: str, why: str) -> dict[str, Any]:
    return row(name, None, unit, target, None, f"not measured: {why}")


def _with_gap(detail: str, value: float | None, limit: float, word: str) -> str:
    """Append 'missed by X%' so a MISS row says by how much without a second lookup."""
    if value is None or limit == 0:
        return detail
    missed = value > limit if word == "over" else value < limit
    if not missed:
        return detail
    gap = abs(value - limit) / abs(limit) * 100
    note = f"missed by {gap:.0f}% ({word} the target)"
    return f"{detail}; {note}" if detail else note


def cpu_seconds() -> float:
    """CPU time of this process plus its reaped children (the read commands it ran)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def median(values: list[float]) -> float | None:
    if not values:
        return None
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def stop_process(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """Stop a child we started (its own process group) by pid: TERM, then KILL after ``timeout``."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        proc.wait(timeout=timeout)


def machine_busy_seconds() -> float:
    """CPU seconds all cores of this machine spent not idle since boot (``/proc/stat``)."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def timed(action: Callable[[], Any]) -> tuple[Any, dict[str, float]]:
    """Run ``action``; its result and {wall, harness_cpu, machine_cpu} seconds."""
    w, c, m = time.perf_counter(), cpu_seconds(), machine_busy_seconds()
    result = action()
    return result, {"wall": time.perf_counter() - w, "harness_cpu": cpu_seconds() - c,
                    "machine_cpu": machine_busy_seconds() - m}
