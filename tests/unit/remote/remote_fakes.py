"""Small fakes for the remote layer: Hosts whose nodes run a tiny in-memory Docker CLI."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from cvs_tasks.remote.hosts import Hosts
from cvs_tasks.remote.results import Node, RawResult


@dataclass
class FakeNode:
    """What one node's docker knows: images, containers (name -> (status, labels)), failures."""

    images: set[str] = field(default_factory=set)
    containers: dict[str, tuple[str, dict]] = field(default_factory=dict)
    fail: dict[str, list[RawResult]] = field(default_factory=dict)  # verb -> queued failures
    tars: dict[str, str] = field(default_factory=dict)  # tar path -> image inside
    exit_after_start: bool = False


def ok(out: str = "") -> RawResult:
    return RawResult(0, out.encode(), b"")


def err(code: int, text: str) -> RawResult:
    return RawResult(code, b"", text.encode())


class FakeDockerHosts(Hosts):
    """Records every (node, command) and answers docker commands from each node's FakeNode."""

    def __init__(self, names: list[str], state: dict[str, FakeNode] | None = None,
                 log: list[tuple[str, str]] | None = None, nodes: list[Node] | None = None):
        super().__init__(nodes or [Node(n, n, rank=i) for i, n in enumerate(names)])
        self.state = state if state is not None else {n: FakeNode() for n in names}
        self.log = log if log is not None else []

    def subset(self, indices):
        return type(self)([], self.state, self.log, [self.nodes[i] for i in indices])

    def commands(self, node: str) -> list[str]:
        return [c for n, c in self.log if n == node]

    def _exec_many(self, commands, stdins, timeout):
        return [self._answer(n.name, c) for n, c in zip(self.nodes, commands)]

    def _answer(self, name: str, command: str) -> RawResult:
        self.log.append((name, command))
        node = self.state[name]
        redirect = command.split(" < ", 1)
        argv = shlex.split(redirect[0])
        verb = " ".join(argv[:2]) if argv[:1] == ["docker"] else argv[0]
        queued = node.fail.get(verb)
        if queued:
            return queued.pop(0)
        if verb == "true":
            return ok()
        if verb == "docker rm":
            missing = [c for c in argv[3:] if c not in node.containers]
            for c in argv[3:]:
                node.containers.pop(c, None)
            if missing:
                return err(1, f"Error response from daemon: No such container: {missing[0]}")
            return ok("\n".join(argv[3:]) + "\n")
        if verb == "docker image":
            return ok("sha256:1\n") if argv[-1] in node.images else err(1, f"Error: No such image: {argv[-1]}")
        if verb in ("docker pull", "docker login"):
            if verb == "docker pull":
                node.images.add(argv[-1])
            return ok()
        if verb == "docker load":
            node.images.add(node.tars[argv[-1]])
            return ok(f"Loaded image: {node.tars[argv[-1]]}\n")
        if verb == "docker run":
            cname = argv[argv.index("--name") + 1]
            if cname in node.containers:
                return err(125, f"docker: Error response from daemon: Conflict. The container name \"/{cname}\" is already in use.")
            labels = dict(v.split("=", 1) for k, v in zip(argv, argv[1:]) if k == "--label")
            node.containers[cname] = ("exited" if node.exit_after_start else "running", labels)
            return ok(f"{cname}-id\n")
        if verb == "docker container":
            if argv[-1] not in node.containers:
                return err(1, f"Error: No such container: {argv[-1]}")
            return ok(node.containers[argv[-1]][0] + "\n")
        if verb == "docker exec":
            return ok(f"exec in {argv[2]}: {argv[-1]}\n") if argv[2] in node.containers else err(
                1, f"Error response from daemon: No such container: {argv[2]}")
        if verb == "docker ps":
            rows = [f"{c}\t{st}\t{lb.get('cvs.run_id', '')}\t{lb.get('cvs.owner', '')}\t{lb.get('cvs.name', '')}"
                    for c, (st, lb) in node.containers.items() if "cvs.run_id" in lb]
            return ok("".join(r + "\n" for r in rows))
        if verb == "docker version":
            return ok("27.1.0\n")
        return err(127, f"fake node cannot run: {command}")
