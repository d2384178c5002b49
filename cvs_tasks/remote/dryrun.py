"""Hosts that print every command instead of running it (``--dry-run``).

Every call answers success, so a stage walks its whole command sequence and the user sees
exactly what would run on each node, in order. Probes answer as if all were well: the
container state probe says ``running`` (so a launch verifies), reads find no file yet.
"""

from __future__ import annotations

from typing import Callable, Sequence

from cvs_tasks.remote.docker_cmd import STATE_FORMAT
from cvs_tasks.remote.hosts import Hosts
from cvs_tasks.remote.results import Node, NodeResult, RawResult, ReadResult


def _dry_answer(command: str) -> bytes:
    if command.startswith("docker container inspect") and STATE_FORMAT in command:
        return b"running\n"
    return b""


class DryRunHosts(Hosts):
    def __init__(self, names: Sequence[str], echo: Callable[[str], None],
                 nodes: Sequence[Node] | None = None, step_args: Sequence[str] = ()) -> None:
        super().__init__(nodes if nodes is not None else
                         [Node(n, n, rank=i) for i, n in enumerate(names)])
        self._echo = echo
        self.step_args = tuple(step_args)

    def with_step_args(self, step_args: Sequence[str]) -> "DryRunHosts":
        """As a Slurm step with these srun options (pyxis): the options are printed with each command."""
        return DryRunHosts([], self._echo, self.nodes, step_args)

    def _exec_many(self, commands, stdins, timeout):
        out = []
        where = f" (srun {' '.join(self.step_args)})" if self.step_args else ""
        for node, command, stdin in zip(self.nodes, commands, stdins):
            self._echo(f"[dry-run] {node.name}{where}: {command}" + (" <stdin>" if stdin is not None else ""))
            out.append(RawResult(0, _dry_answer(command), b""))
        return out

    def subset(self, indices):
        return DryRunHosts([], self._echo, [self.nodes[i] for i in indices], self.step_args)

    def put(self, data: bytes, path: str, mode: int = 0o600, *, timeout: float = 30.0) -> list[NodeResult]:
        """Say what would be written (never the content)."""
        for node in self.nodes:
            self._echo(f"[dry-run] {node.name}: write {path} (mode {mode:o}, {len(data)} bytes)")
        return [NodeResult(n.name, n.rank, True, 0, "", "", None) for n in self.nodes]

    def read_from(self, paths, offsets, max_bytes, *, sidecars=None, timeout: float = 30.0) -> list[ReadResult]:
        """Nothing to read in a dry run: every file is still missing (not echoed: it is a poll)."""
        return [ReadResult(n.name, n.rank, "", o, None, None, None) for n, o in zip(self.nodes, offsets)]
