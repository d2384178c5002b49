"""Fan-out: ``cluster.check`` and container launch + remove on N = 1, 8, 32 testbed nodes.

Runs the library functions the tasks call (``connect`` + ``check_nodes``; ``DockerRuntime``
``launch``/``remove``) against real sshd nodes. Only the first nodes of the testbed have their own
dockerd; the others are sshd-only and their docker CLI talks to node 0's daemon. So that 32
containers can live in one daemon, each node's container name gets a ``-n<rank>`` suffix by a
thin ``Hosts`` wrapper; every command is otherwise exactly what the stage sends.
"""

from __future__ import annotations

import re
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Sequence

from benchmarks.common import at_most, row, timed
from cvs_tasks.config import load_cluster
from cvs_tasks.remote import DockerRuntime, Hosts, check_nodes, connect, container_spec

RATIO_TARGET = 2.0
CONTAINER_NAME = "cvs_bench_fanout"


class NamePerNode(Hosts):
    """Gives node ``r``'s container the name ``<name>-n<r>`` in every command it runs."""

    def __init__(self, inner: Hosts, name: str):
        super().__init__(inner.nodes)
        self.inner = inner
        self.name = name
        self._pattern = re.compile(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])")

    def _exec_many(self, commands: Sequence[str], stdins, timeout: float):
        renamed = [self._pattern.sub(f"{self.name}-n{node.rank}", c) for c, node in zip(commands, self.nodes)]
        return self.inner._exec_many(renamed, stdins, timeout)

    def subset(self, indices):
        return NamePerNode(self.inner.subset(indices), self.name)


def measure(cluster_path: Path, container: dict[str, Any], visible_check: str, log_dir: str) -> dict[str, Any]:
    """One N: cold check (connect included), warm check, launch, remove; wall and CPU of each."""
    cluster = load_cluster(cluster_path)
    n = len(cluster.hosts)
    out: dict[str, Any] = {"n": n}
    hosts = None

    def check(cold: bool):
        nonlocal hosts
        if cold:
            hosts = connect(cluster, connect_timeout=20.0)
        return check_nodes(hosts, "docker", container["image"], log_dir, visible_check, min_free_gib=1.0)

    try:
        checks, out["check_cold"] = timed(lambda: check(True))
        _, out["check_warm"] = timed(lambda: check(False))
        out["check_failed"] = sorted({name for c in checks for name in c.failed()})
        runtime = DockerRuntime(NamePerNode(hosts, container["name"]), container_spec(container),
                                run_id=f"bench-{uuid.uuid4().hex[:6]}", owner="cvs-bench", nnodes=n)
        launched, out["launch"] = timed(runtime.launch)
        out["launch_failed"] = [r.error for r in launched if not r.ok][:2]
        out["running"] = sum(runtime.running()) if not out["launch_failed"] else 0
        removed, out["remove"] = timed(runtime.remove)
        out["remove_failed"] = [r.error for r in removed if not r.ok][:2]
    finally:
        if hosts is not None:
            hosts.close()
    out["launch_remove"] = {k: out["launch"][k] + out["remove"][k] for k in out["launch"]}
    return out


def curve(points: list[dict[str, Any]], key: str) -> str:
    return ", ".join(f"N={p['n']}: {p[key]['wall']:.2f}s" for p in points)


def cpu_note(points: list[dict[str, Any]], key: str) -> str:
    first, last = points[0][key], points[-1][key]
    cores = os.cpu_count() or 1
    floor = last["machine_cpu"] / cores
    return (f"harness CPU {first['harness_cpu']:.2f}s -> {last['harness_cpu']:.2f}s; whole-machine busy CPU "
            f"{first['machine_cpu']:.1f}s -> {last['machine_cpu']:.1f}s: at N={points[-1]['n']} the nodes' "
            f"sshd/bash/docker work alone needs >= {floor:.1f}s of wall on this machine's {cores} cores, "
            f"which every testbed node shares")


def run(tb: Any, container: dict[str, Any], visible_check: str, log_dir: str,
        sizes: Sequence[int] = (1, 8, 32), repeats: int = 1) -> list[dict[str, Any]]:
    """``tb``: a started ``BenchTestbed``; ``container``: the suite's container block (its name is
    replaced by the benchmark's own)."""
    container = dict(container, name=CONTAINER_NAME, lifetime="per_run")
    points = []
    with tempfile.TemporaryDirectory(prefix="cvs_bench_fanout_") as tmp:
        warm = tb.cluster(min(2, max(sizes)), Path(tmp))
        measure(warm, container, visible_check, log_dir)  # first container on a fresh daemon is slower; untimed
        for n in sizes:
            runs = [measure(tb.cluster(n, Path(tmp)), container, visible_check, log_dir)
                    for _ in range(repeats)]
            point: dict[str, Any] = {"n": n}
            for key in ("check_cold", "check_warm", "launch_remove"):
                point[key] = min((r[key] for r in runs), key=lambda t: t["wall"])
            for key in ("check_failed", "launch_failed", "remove_failed", "running"):
                point[key] = runs[-1][key]
            points.append(point)
    first, last = points[0], points[-1]
    label = f"N={last['n']}/N={first['n']}"
    rows = []
    for key, what in (("check_cold", "cluster.check incl. SSH connect"),
                      ("check_warm", "cluster.check on open connections"),
                      ("launch_remove", "container launch + remove")):
        ratio = last[key]["wall"] / first[key]["wall"] if first[key]["wall"] else None
        rows.append(at_most(f"fanout.{key}[{label}]", ratio, RATIO_TARGET, "x",
                            f"{what}: {curve(points, key)}; {cpu_note(points, key)}"))
    broken = [p for p in points if p["launch_failed"] or p["remove_failed"] or p["running"] != p["n"]]
    detail = ("every launched container was running before removal" if not broken else
              "; ".join(f"N={p['n']}: {p['launch_failed'] or p['remove_failed']}" for p in broken))
    failed_checks = sorted({c for p in points for c in p["check_failed"]})
    if failed_checks:
        detail += f"; checks that fail on the bare hosts (timing unaffected): {', '.join(failed_checks)}"
    rows.append(row("fanout.containers_running", sum(p["running"] for p in points), "containers",
                    f"= {sum(p['n'] for p in points)}", not broken, detail))
    return rows
