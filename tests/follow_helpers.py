"""What the follower tests share: a consumer that holds offsets like the watcher, and the followers' pids."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from cvs_tasks.remote.follow import Delta, Exited, FollowOptions, Lost
from cvs_tasks.remote.follower import FOLLOWER_NAME

FAST = FollowOptions(poll_s=0.05, frame_bytes=1000, heartbeat_s=1)


def follow_to_end(follow, count: int, deadline_s: float = 30.0, on_event=None) -> tuple[list[bytes], dict]:
    """Consume events like the watcher does (restart a lost follower from the held offset)."""
    held, exits, losses = [b""] * count, {}, []
    deadline = time.monotonic() + deadline_s
    while len(exits) < count and time.monotonic() < deadline:
        for event in follow.events(1.0):
            if isinstance(event, Delta):
                assert event.offset == len(held[event.index])
                held[event.index] += event.data
            elif isinstance(event, Exited):
                exits[event.index] = event.code
            elif isinstance(event, Lost):
                losses.append(event.error)
                follow.restart(event.index, len(held[event.index]))
            if on_event:
                on_event(event)
    return held, {"exits": exits, "losses": losses}


def follower_pids(log: Path) -> list[int]:
    """The follower of ``log`` on this machine (its oldest process: the subshells of its read pipe
    carry the same command line for a moment), or [] when none runs."""
    found = subprocess.run(["pgrep", "-o", "-f", f"{FOLLOWER_NAME} {log}"], capture_output=True, text=True)
    return [int(p) for p in found.stdout.split()]
