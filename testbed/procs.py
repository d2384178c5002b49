"""Processes the testbed starts: spawn detached, check liveness, stop by recorded pid.

A pid is only ever signalled after checking that its command line still names one of the
testbed's own paths, so a recycled pid is never hit.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def spawn(cmd: list[str], log_path: Path, env: dict | None = None) -> int:
    """Start a long-lived daemon in its own session (survives the caller); returns its pid."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True, env=env)
    return proc.pid


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except (ChildProcessError, OSError):
        pass


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid: int | None, marker: str | None = None) -> bool:
    """Running (not a zombie) and, if given, its command line contains `marker`."""
    if not pid:
        return False
    _reap(pid)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":
        return False
    return marker is None or marker in cmdline(pid)


def children_of(pid: int) -> list[int]:
    """All descendants of pid (walks /proc once per level)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[-1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    found, frontier = [], [pid]
    while frontier:
        nxt = []
        for p in frontier:
            nxt.extend(parents.get(p, []))
        found.extend(nxt)
        frontier = nxt
    return found


def pids_mentioning(marker: str) -> list[int]:
    """Processes whose command line names the given (testbed-owned) path."""
    me = os.getpid()
    return [int(e.name) for e in Path("/proc").iterdir()
            if e.name.isdigit() and int(e.name) != me and marker in cmdline(int(e.name))]


def stop(pid: int, marker: str, timeout_s: float = 20.0) -> bool:
    """SIGTERM, wait (bounded), then SIGKILL; only if the pid still belongs to us. True if it was running."""
    if not alive(pid, marker):
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


def kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _reap(pid)
