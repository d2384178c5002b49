"""Is a run still making progress? The caller owns the clock and passes the times in."""

from __future__ import annotations


def is_stalled(last_progress_time: float, now: float, timeout: float) -> bool:
    """True when no new step arrived for more than ``timeout`` seconds (timeout <= 0: never)."""
    if timeout is None or timeout <= 0:
        return False
    return (now - last_progress_time) > timeout
