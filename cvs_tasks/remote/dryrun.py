"""Hosts that print every command instead of running it (``--dry-run``).

With ``run.rundir.DryRunDir`` (a run directory that keeps its records in memory) this is the whole
dry run: the stages run the code of a run and these hosts print what each node would be asked.
Every call answers success, so a stage walks its whole command sequence and the user sees
exactly what would run on each node, in order. Probes answer as if all were well: the
container state probe says ``running`` (so a launch verifies), reads find no file yet, and a
command the harness said what to expect of (``answer``: the log-folder lock taken, the Primus YAML
found, the checkpoint saved) gets that answer.

Some values are only known once a node answers (the Primus experiment YAML the image has, the
experiment folder its header names): the dry run prints the first guess, and every line that holds
one ends with ``# assumed (resolved on the node at run time): <the rule>``, a shell comment, so the
line can still be copied and run. ``assume`` registers such a value; ``mark`` appends the comment.
"""

from __future__ import annotations

import shlex
from typing import Callable, Mapping, Sequence

from cvs_tasks.remote.docker_cmd import STATE_FORMAT
from cvs_tasks.remote.hosts import Hosts
from cvs_tasks.remote.results import Node, NodeResult, RawResult, ReadResult

ASSUMED = "# assumed (resolved on the node at run time): "


def mark_assumed(line: str, assumed: Mapping[str, str]) -> str:
    """``line`` with the rule of every assumed value it holds appended as a shell comment."""
    rules = list(dict.fromkeys(rule for value, rule in assumed.items() if value and value in line))
    return f"{line}  {ASSUMED}{'; '.join(rules)}" if rules else line


def _holds(command: str, text: str) -> bool:
    """``command`` holds ``text``, as written or inside a quoted argument (``bash -lc '...'``)."""
    if text in command:
        return True
    try:
        return any(text in word for word in shlex.split(command))
    except ValueError:
        return False


class DryRunHosts(Hosts):
    def __init__(self, names: Sequence[str], echo: Callable[[str], None],
                 nodes: Sequence[Node] | None = None, step_args: Sequence[str] = (),
                 assumed: dict[str, str] | None = None, answers: dict[str, str] | None = None) -> None:
        super().__init__(nodes if nodes is not None else
                         [Node(n, n, rank=i) for i, n in enumerate(names)])
        self._echo = echo
        self.step_args = tuple(step_args)
        self.assumed = {} if assumed is None else assumed  # shared by every view of these hosts
        self.answers = {} if answers is None else answers  # likewise

    def assume(self, value: str, rule: str) -> None:
        """From now on, lines holding ``value`` are printed with ``rule`` (how a run resolves it)."""
        self.assumed[value] = rule

    def answer(self, holding: str, stdout: str) -> None:
        """From now on, a command holding ``holding`` answers ``stdout`` on every node."""
        self.answers[holding] = stdout

    def _answer(self, command: str) -> bytes:
        if command.startswith("docker container inspect") and STATE_FORMAT in command:
            return b"running\n"
        for holding, stdout in reversed(self.answers.items()):  # the latest expectation wins
            if _holds(command, holding):
                return stdout.encode("utf-8")
        return b""

    def mark(self, line: str) -> str:
        return mark_assumed(line, self.assumed)

    def with_step_args(self, step_args: Sequence[str]) -> "DryRunHosts":
        """As a Slurm step with these srun options (pyxis): the options are printed with each command."""
        return DryRunHosts([], self._echo, self.nodes, step_args, self.assumed, self.answers)

    def _exec_many(self, commands, stdins, timeout):
        out = []
        where = f" (srun {' '.join(self.step_args)})" if self.step_args else ""
        for node, command, stdin in zip(self.nodes, commands, stdins):
            line = f"[dry-run] {node.name}{where}: {command}" + (" <stdin>" if stdin is not None else "")
            self._echo(self.mark(line))
            out.append(RawResult(0, self._answer(command), b""))
        return out

    def subset(self, indices):
        return DryRunHosts([], self._echo, [self.nodes[i] for i in indices], self.step_args, self.assumed,
                           self.answers)

    def put(self, data: bytes, path: str, mode: int = 0o600, *, timeout: float = 30.0) -> list[NodeResult]:
        """Say what would be written (never the content)."""
        for node in self.nodes:
            self._echo(f"[dry-run] {node.name}: write {path} (mode {mode:o}, {len(data)} bytes)")
        return [NodeResult(n.name, n.rank, True, 0, "", "", None) for n in self.nodes]

    def put_each(self, files, mode: int = 0o600, *, timeout: float = 30.0) -> list[NodeResult]:
        """Say what would be written on each node (never the content)."""
        for node, (data, path) in zip(self.nodes, files):
            self._echo(f"[dry-run] {node.name}: write {path} (mode {mode:o}, {len(data)} bytes)")
        return [NodeResult(n.name, n.rank, True, 0, "", "", None) for n in self.nodes]

    def read_from(self, paths, offsets, max_bytes, *, sidecars=None, timeout: float = 30.0) -> list[ReadResult]:
        """Nothing to read in a dry run: every file is still missing (not echoed: it is a poll)."""
        return [ReadResult(n.name, n.rank, "", o, None, None, None) for n, o in zip(self.nodes, offsets)]
