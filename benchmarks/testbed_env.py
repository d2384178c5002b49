"""The benchmarks' own testbed: N loopback sshd nodes (the first two with a dockerd each).

It lives beside any testbed the tests use (its own state directory and 127.0.0.100...), so the
benchmarks never touch, resize or stop someone else's nodes, and its containers carry their own
names. ``BenchTestbed.down()`` stops exactly what ``up`` recorded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STATE_DIR = Path("/tmp/cvs-bench-testbed")
FIRST_HOST = 100
SHARED_TESTBED = "/tmp/cvs-testbed"  # what the packaged testbed configs name


def unavailable() -> str | None:
    """Why no testbed can be started here (None: it can)."""
    try:
        from testbed.cluster import check_prerequisites
    except ImportError as exc:
        return f"the testbed package is not importable ({exc})"
    problems = check_prerequisites()
    return "; ".join(problems) if problems else None


@dataclass
class BenchTestbed:
    nodes: int
    docker_nodes: int
    state_dir: Path = STATE_DIR
    info: Any = None

    def up(self) -> "BenchTestbed":
        """Start it; a leftover of an earlier benchmark run in our state dir is stopped first."""
        from testbed.cluster import up

        if self.state_dir.exists():
            self.down()
        self.info = up(nodes=self.nodes, docker_nodes=self.docker_nodes, state_dir=self.state_dir,
                       first_host=FIRST_HOST, log=lambda *_: None)
        return self

    def down(self) -> None:
        from testbed.cluster import down

        down(self.state_dir, log=lambda *_: None)

    @property
    def cluster_path(self) -> Path:
        return Path(self.info.cluster_file)

    @property
    def node0(self) -> str:
        return self.info.nodes[0].address

    def cluster(self, count: int, dest: Path) -> Path:
        """A copy of the testbed's cluster file holding only its first ``count`` nodes."""
        data = json.loads(self.cluster_path.read_text())
        names = list(data["node_dict"])[:count]
        if len(names) < count:
            raise ValueError(f"{self.cluster_path} has {len(names)} nodes, need {count}")
        data["node_dict"] = {n: data["node_dict"][n] for n in names}
        if isinstance(data.get("head_node_dict"), dict):
            data["head_node_dict"]["mgmt_ip"] = names[0]
        path = dest / f"bench-cluster-{count}.json"
        path.write_text(json.dumps(data, indent=2))
        return path

    def config_replacements(self) -> tuple[tuple[str, str], ...]:
        """How a packaged testbed config is pointed at this testbed (paths, rendezvous address)."""
        return ((SHARED_TESTBED, str(self.state_dir)), ('"127.0.0.2"', f'"{self.node0}"'))

    @property
    def shared_dir(self) -> Path:
        return Path(self.info.shared_dir)
