"""``LocalHosts``: the machine the harness runs on, through subprocesses, with SSH's semantics.

Commands run under ``bash -c`` (``sh -c`` when bash is absent) in their own process group, so
a timeout kills the whole command, grandchildren included.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from cvs_tasks.remote.hosts import Hosts
from cvs_tasks.remote.results import Node, RawResult
from cvs_tasks.remote.streams import PipeStream

_SHELL = shutil.which("bash") or "/bin/sh"
_DRAIN_AFTER_KILL_S = 5.0


def run_local(command: str, stdin: bytes | None, timeout: float,
              env: dict[str, str] | None = None) -> RawResult:
    """Run one shell command here; a timeout or a failure to start is a result, not an exception."""
    try:
        proc = subprocess.Popen(
            [_SHELL, "-c", command],
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, env=env,
        )
    except OSError as exc:
        return RawResult(None, b"", b"", f"cannot start {_SHELL}: {exc}")
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        try:
            out, err = proc.communicate(timeout=_DRAIN_AFTER_KILL_S)
        except subprocess.TimeoutExpired:
            out, err = b"", b""
        return RawResult(None, out or b"", err or b"", f"command timed out after {timeout:g}s")
    return RawResult(proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


class LocalHosts(Hosts):
    """Nodes that are this machine (``{"local": true}`` in the cluster file); no SSH involved."""

    def __init__(self, nodes: Sequence[Node]):
        super().__init__(nodes)

    def _exec_many(self, commands, stdins, timeout):
        if len(self.nodes) == 1:
            return [run_local(commands[0], stdins[0], timeout)]
        with ThreadPoolExecutor(max_workers=len(self.nodes)) as pool:
            return list(pool.map(lambda pair: run_local(pair[0], pair[1], timeout),
                                 zip(commands, stdins)))

    def subset(self, indices):
        return LocalHosts([self.nodes[i] for i in indices])

    def _follower_opener(self):
        """A follower is a subprocess here; its stdout pipe is the stream."""
        return lambda _index, args: PipeStream(args.argv())
