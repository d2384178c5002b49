"""The running side of Slurm's followers: one srun process, one pipe, a stream per node.

``FollowStep`` is the srun of ``remote/slurm_follow.py``'s step (all of a job's nodes at its start,
or one node when its follower is restarted). ``StreamFollow`` (``remote/streams.py``) selects on its
stdout once and reads each node through a ``TaskStream``. Pokes are coalesced: one newline on
srun's stdin reaches every follower of the step, so a drain of 1,024 nodes writes one newline, not
1,024 (a node's poke writes one only while that node owes no answer to an earlier one).
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Sequence

from cvs_tasks.remote.follower import FollowerArgs
from cvs_tasks.remote.slurm_follow import RecordDemux, follow_command, follow_table
from cvs_tasks.remote.streams import READ_CHUNK, FollowerStartError, FollowerStream, SharedSource, read_tail

STOP_WAIT_S = 3.0  # after EOF on its stdin and SIGTERM, how long srun may take before SIGKILL


class FollowStep(SharedSource):
    """One srun step following ``indices[k]``'s log on node ``names[k]``; a stream per node."""

    def __init__(self, job_id: str, names: Sequence[str], indices: Sequence[int], args: Sequence[FollowerArgs],
                 extra: Sequence[str], env: dict[str, str]):
        argv = follow_command(job_id, names, args[0], extra)
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True, env=env)
        except OSError as exc:
            raise FollowerStartError(f"cannot start srun: {exc.strerror or exc}") from None
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        self.names = list(names)
        self.indices = list(indices)
        self._row_of = {index: row for row, index in enumerate(self.indices)}
        self._demux = RecordDemux(len(self.indices))
        self._fd, self._err = self.proc.stdout.fileno(), self.proc.stderr.fileno()
        os.set_blocking(self._fd, False)
        os.set_blocking(self._err, False)
        self._stderr = b""
        self._eof = False
        self._stopped = False
        self._live = set(range(len(self.indices)))  # rows whose stream is still held
        self._owed = [0] * len(self.indices)  # newlines sent that row has not answered yet
        try:
            self.proc.stdin.write(follow_table(self.names, args))
            self.proc.stdin.flush()
        except OSError:
            pass  # srun ended already: its end is every node's Lost, with its reason
        self.streams = [TaskStream(self, row) for row in range(len(self.indices))]

    # -- SharedSource ---------------------------------------------------------------------
    def fileno(self) -> int:
        return self._fd

    def pump(self) -> list[int]:
        self._read_stderr()
        touched: set[int] = set()
        while not self._eof:
            try:
                chunk = os.read(self._fd, READ_CHUNK)
            except BlockingIOError:
                break
            if not chunk:
                self._eof = True
                touched |= self._live  # every stream still held learns the end
                break
            rows, answers = self._demux.feed(chunk)
            touched |= rows & self._live
            for row in answers:
                self._owed[row] = max(0, self._owed[row] - 1)
        return [self.indices[row] for row in sorted(touched)]

    @property
    def closed(self) -> bool:
        return self._eof or self._stopped

    # -- for the streams -------------------------------------------------------------------
    def read(self, row: int) -> tuple[bytes, bool]:
        state = self._demux.rows[row]
        return self._demux.take_out(row), self._eof or state.ended is not None or state.broken is not None

    def poke(self, row: int) -> None:
        if self._owed[row]:
            return  # a newline this follower has not answered yet is on its way: it answers that one
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"\n")
        self.proc.stdin.flush()
        self._owed = [owed + 1 for owed in self._owed]

    def why_ended(self, row: int) -> str:
        state = self._demux.rows[row]
        if state.broken:
            return f"its Slurm task sent {state.broken}"
        if state.ended is not None:
            return f"exit status {state.ended}" + self._detail(row)
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "srun closed its output but is still running"
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        return f"its Slurm step ended (srun {how})" + self._detail(row)

    def release(self, row: int) -> None:
        """The harness is done with ``row``'s stream; srun stops once no stream is held."""
        self._live.discard(row)
        if not self._live:
            self.stop()

    def stop(self) -> None:
        """EOF on srun's stdin ends every follower; srun is then told to end, and killed if it must be."""
        if self._stopped:
            return
        self._stopped = True
        for pipe in (self.proc.stdin,):
            try:
                pipe.close()
            except OSError:
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=STOP_WAIT_S)
            except (ProcessLookupError, PermissionError):
                pass
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                try:
                    self.proc.wait(timeout=STOP_WAIT_S)
                except subprocess.TimeoutExpired:
                    pass
        for pipe in (self.proc.stdout, self.proc.stderr):
            try:
                pipe.close()
            except OSError:
                pass

    def _detail(self, row: int) -> str:
        self._read_stderr()
        lines = self._stderr.decode("utf-8", "replace").strip().splitlines()
        name = self.names[row]
        named = [line for line in lines if f" {name}:" in line or f" {name} " in line] or lines
        return f": {named[-1][:300]}" if named else ""

    def _read_stderr(self) -> None:
        if not self._stopped:  # once stopped its pipes are closed: the descriptor may be another's now
            self._stderr = read_tail(self._err, self._stderr)


class TaskStream(FollowerStream):
    """One node's follower inside a ``FollowStep``: what its records carried, as its own stream."""

    def __init__(self, step: FollowStep, row: int):
        self.source = step
        self._step = step
        self._row = row
        self._closed = False

    def fileno(self) -> int:
        return self._step.fileno()

    def read(self) -> tuple[bytes, bool]:
        return self._step.read(self._row)

    def poke(self) -> None:
        self._step.poke(self._row)

    def why_ended(self) -> str:
        return self._step.why_ended(self._row)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._step.release(self._row)
