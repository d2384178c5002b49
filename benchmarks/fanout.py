"""Fan-out: ``cluster.check`` and container launch + remove on N = 1, 8, 32 testbed nodes.

Posed so that a MISS means the harness is slow, not the machine: every testbed node's sshd,
bash and docker run on this machine's few cores, so wall time at N = 32 is set by the nodes' own
work. Two figures per operation:

* harness CPU per node (this process's CPU / N): what the harness itself costs;
* the same over the CPU of one plain paramiko exec round trip measured in the same run
  (``benchmarks/plain_ssh.py``): the target, so that a slower machine of this kind does not miss
  for its speed alone (docs/measured.md);
* wall ÷ lower bound. The bound is the larger of the operation's wall time on one node (N nodes
  in parallel cannot beat one) and the CPU the operation needs on this machine (the nodes' own
  work, measured from the process accounting of every testbed sshd and dockerd process tree,
  plus the harness's CPU) spread over the cores it had (all cores minus what processes outside
  the benchmark used meanwhile). Waiting the harness adds on top (a serial loop, a sleep) is
  what the ratio shows.

Runs the library functions the tasks call (``connect`` + ``check_nodes``; ``DockerRuntime``
``launch``/``remove``) against real sshd nodes. Only the first nodes of the testbed have their own
dockerd; the others are sshd-only and their docker CLI talks to node 0's daemon. So that 32
containers can live in one daemon, each node's container name gets a ``-n<rank>`` suffix by a
thin ``Hosts`` wrapper; every command is otherwise exactly what the stage sends.
"""

from __future__ import annotations

import os
import re
import tempfile
import uuid
from pathlib import Path
from typing import Any, Sequence

from benchmarks.common import at_most, ratio, reported, row, timed
from benchmarks.plain_ssh import reference_or_reason
from cvs_tasks.config import load_cluster
from cvs_tasks.remote import DockerRuntime, Hosts, check_nodes, connect, container_spec

BOUND_TARGET = 1.25
# harness CPU per node of a check on open connections / one plain paramiko exec round trip in the same
# run: 1.8x at N = 32 (2.0 ms / 1.13 ms, 2026-12-06); the target is the old 10 ms in units of that round
# trip here (0.9-1.3 ms), 3.2x the 3.1 ms measured before
HARNESS_VS_PLAIN_EXEC = 10.0
OLD_HARNESS_MS_PER_NODE = 10.0
CONTAINER_NAME = "cvs_bench_fanout"
_TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(roots: Sequence[int]) -> float:
    """CPU seconds used by the processes under ``roots`` (themselves, live descendants, and the
    reaped children each has accounted): the testbed nodes' own work."""
    stats: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(entry)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / _TICK)
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [r for r in roots if r in stats]
    while todo:
        pid = todo.pop()
        total += stats[pid][1]
        todo.extend(children.get(pid, ()))
    return total


def timed_nodes(action, roots: Sequence[int]):
    """``timed`` plus ``node_cpu``: CPU the testbed's process trees used meanwhile."""
    before = tree_cpu_seconds(roots)
    result, times = timed(action)
    times["node_cpu"] = max(0.0, tree_cpu_seconds(roots) - before)
    return result, times


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


def measure(cluster_path: Path, container: dict[str, Any], visible_check: str, log_dir: str,
            roots: Sequence[int] = ()) -> dict[str, Any]:
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
        checks, out["check_cold"] = timed_nodes(lambda: check(True), roots)
        _, out["check_warm"] = timed_nodes(lambda: check(False), roots)
        out["check_failed"] = sorted({name for c in checks for name in c.failed()})
        runtime = DockerRuntime(NamePerNode(hosts, container["name"]), container_spec(container),
                                run_id=f"bench-{uuid.uuid4().hex[:6]}", owner="cvs-bench", nnodes=n)
        launched, out["launch"] = timed_nodes(runtime.launch, roots)
        out["launch_failed"] = [r.error for r in launched if not r.ok][:2]
        out["running"] = sum(runtime.running()) if not out["launch_failed"] else 0
        removed, out["remove"] = timed_nodes(runtime.remove, roots)
        out["remove_failed"] = [r.error for r in removed if not r.ok][:2]
    finally:
        if hosts is not None:
            hosts.close()
    out["launch_remove"] = {k: out["launch"][k] + out["remove"][k] for k in out["launch"]}
    return out


def curve(points: list[dict[str, Any]], key: str) -> str:
    return ", ".join(f"N={p['n']}: {p[key]['wall']:.2f}s" for p in points)


def lower_bound(t: dict[str, float], one_node_wall: float) -> tuple[float, str]:
    """The least wall time the operation could take here, and how it was set (module docstring)."""
    cores = os.cpu_count() or 1
    ours = t["node_cpu"] + t["harness_cpu"]
    others = max(0.0, t["machine_cpu"] - ours)
    free = max(cores - others / t["wall"], 0.25) if t["wall"] else cores
    cpu_bound = ours / free
    why = (f"nodes' own CPU {t['node_cpu']:.2f}s + harness {t['harness_cpu']:.2f}s on {free:.2f} of {cores} "
           f"cores (others used {others:.1f}s) = {cpu_bound:.2f}s; one node alone {one_node_wall:.2f}s")
    return max(cpu_bound, one_node_wall), why


def harness_rows(n: int, harness_cpu_s: float, plain_exec_cpu_s: float | None, what: str,
                 plain_problem: str = "") -> list[dict[str, Any]]:
    """The harness's CPU per node reported, and judged against one plain exec round trip's CPU."""
    per_node_ms = harness_cpu_s / n * 1000
    plain_ms = None if plain_exec_cpu_s is None else plain_exec_cpu_s * 1000
    return [
        reported(f"fanout.check_warm.harness_cpu_per_node[N={n}]", per_node_ms, "ms",
                 f"{what}: {harness_cpu_s * 1000:.0f} ms of this process's CPU for {n} nodes; was a target of "
                 f"<= {OLD_HARNESS_MS_PER_NODE:g} ms, now posed as the ratio below"),
        at_most(f"fanout.check_warm.harness_cpu_vs_plain_exec[N={n}]", ratio(per_node_ms, plain_ms),
                HARNESS_VS_PLAIN_EXEC, "x plain exec",
                f"{per_node_ms:.1f} ms per node; one plain paramiko exec round trip on an open connection "
                + (f"not measured ({plain_problem or 'no figure'})" if plain_ms is None
                   else f"{plain_ms:.2f} ms of CPU")
                + " in the same run (benchmarks/plain_ssh.py)"),
    ]


def run(tb: Any, container: dict[str, Any], visible_check: str, log_dir: str,
        sizes: Sequence[int] = (1, 8, 32), repeats: int = 1) -> list[dict[str, Any]]:
    """``tb``: a started ``BenchTestbed``; ``container``: the suite's container block (its name is
    replaced by the benchmark's own)."""
    container = dict(container, name=CONTAINER_NAME, lifetime="per_run")
    roots = [pid for node in tb.info.nodes for pid in (node.sshd_pid, node.dockerd_pid) if pid]
    points = []
    with tempfile.TemporaryDirectory(prefix="cvs_bench_fanout_") as tmp:
        warm = tb.cluster(min(2, max(sizes)), Path(tmp))
        measure(warm, container, visible_check, log_dir)  # first container on a fresh daemon is slower; untimed
        for n in sizes:
            runs = [measure(tb.cluster(n, Path(tmp)), container, visible_check, log_dir, roots)
                    for _ in range(repeats)]
            point: dict[str, Any] = {"n": n}
            for key in ("check_cold", "check_warm", "launch_remove"):
                point[key] = min((r[key] for r in runs), key=lambda t: t["wall"])
            for key in ("check_failed", "launch_failed", "remove_failed", "running"):
                point[key] = runs[-1][key]
            points.append(point)
        plain_exec_cpu, plain_problem = reference_or_reason(tb.cluster(1, Path(tmp)))
    first, last = points[0], points[-1]
    rows = []
    for key, what in (("check_cold", "cluster.check incl. SSH connect"),
                      ("check_warm", "cluster.check on open connections"),
                      ("launch_remove", "container launch + remove")):
        t = last[key]
        bound, why = lower_bound(t, first[key]["wall"])
        per_node_ms = t["harness_cpu"] / last["n"] * 1000
        rows.append(at_most(f"fanout.{key}.wall_vs_bound[N={last['n']}]", t["wall"] / bound if bound else None,
                            BOUND_TARGET, "x lower bound",
                            f"{what}: {curve(points, key)}; bound {bound:.2f}s ({why}); harness CPU "
                            f"{per_node_ms:.1f} ms per node"))
        if key == "check_warm":
            rows += harness_rows(last["n"], t["harness_cpu"], plain_exec_cpu, what, plain_problem)
    broken = [p for p in points if p["launch_failed"] or p["remove_failed"] or p["running"] != p["n"]]
    detail = ("every launched container was running before removal" if not broken else
              "; ".join(f"N={p['n']}: {p['launch_failed'] or p['remove_failed']}" for p in broken))
    failed_checks = sorted({c for p in points for c in p["check_failed"]})
    if failed_checks:
        detail += f"; checks that fail on the bare hosts (timing unaffected): {', '.join(failed_checks)}"
    rows.append(row("fanout.containers_running", sum(p["running"] for p in points), "containers",
                    f"= {sum(p['n'] for p in points)}", not broken, detail))
    return rows
