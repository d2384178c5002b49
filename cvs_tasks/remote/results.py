"""What a fan-out call hands back: one value per node, failures included, never an exception.

Every error string starts with ``node <name>:`` so a message lifted out of a list still says
which machine it came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Node:
    """One machine of the cluster as the transport sees it (rank = position in the cluster file)."""

    name: str
    address: str
    port: int = 22
    rank: int = 0

    @property
    def label(self) -> str:
        """How messages name this node: its cluster-file key, plus the address when they differ."""
        if self.address and self.address != self.name:
            return f"{self.name} ({self.address})"
        return self.name


@dataclass(frozen=True)
class NodeResult:
    """Outcome of one command on one node; ``error`` is None exactly when ``ok`` is true."""

    host: str
    rank: int
    ok: bool
    exit_code: int | None
    stdout: str
    stderr: str
    error: str | None
    final: bool = False  # a failure no retry can mend (host key, authentication)


@dataclass(frozen=True)
class ReadResult:
    """Bytes past ``offset`` of one node's file, decoded; ``offset`` is where the next read starts.

    ``size`` is the file's size when the read began (None: the file does not exist yet);
    ``sidecar`` the content of the small extra file (None: not asked for, or absent).
    """

    host: str
    rank: int
    data: str
    offset: int
    size: int | None
    sidecar: str | None
    error: str | None


@dataclass(frozen=True)
class RawResult:
    """Transport-level outcome with undecoded bytes; ``error`` set when the command never finished."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    error: str | None = None
    final: bool = False


def node_error(node: Node, message: str) -> str:
    """The one place the ``node <name>: ...`` prefix is written."""
    return f"node {node.label}: {message}"


def last_line(text: str, limit: int = 300) -> str:
    """The last non-empty line of some output, shortened: enough to say what went wrong."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return ""


def to_node_result(node: Node, raw: RawResult, *, what: str = "") -> NodeResult:
    """Decode a raw result and classify it: exit 0 is ok, anything else gets a per-node error."""
    stdout = raw.stdout.decode("utf-8", errors="replace")
    stderr = raw.stderr.decode("utf-8", errors="replace")
    prefix = f"{what}: " if what else ""
    if raw.error is not None:
        return NodeResult(node.name, node.rank, False, raw.exit_code, stdout, stderr,
                          node_error(node, prefix + raw.error), final=raw.final)
    if raw.exit_code == 0:
        return NodeResult(node.name, node.rank, True, 0, stdout, stderr, None)
    detail = last_line(stderr) or last_line(stdout)
    message = f"{prefix}exit status {raw.exit_code}" + (f": {detail}" if detail else "")
    return NodeResult(node.name, node.rank, False, raw.exit_code, stdout, stderr,
                      node_error(node, message))


def failures(results: Sequence[NodeResult | ReadResult]) -> list[str]:
    """The error strings of the nodes that failed, in rank order."""
    return [r.error for r in results if r.error]


def failure_summary(results: Sequence[NodeResult], what: str) -> str:
    """One message for an InfraError: what failed, then one indented line per failing node."""
    lines = [f"{what} failed on {sum(1 for r in results if not r.ok)} of {len(results)} node(s):"]
    lines += [f"  {err}" for err in failures(results)]
    return "\n".join(lines)
