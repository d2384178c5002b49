"""``cluster.check``: can every node run a job? SSH, Docker, image, GPUs, free disk — with reasons.

I/O is one command per check over all reachable nodes; parsing and the table are pure.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Sequence

from cvs_tasks.remote import docker_cmd as dc
from cvs_tasks.remote.hosts import Hosts
from cvs_tasks.remote.results import NodeResult, last_line

CHECKS = ("ssh", "docker", "image", "gpus", "disk")


@dataclass(frozen=True)
class CheckItem:
    """One check on one node; ``ok`` None means skipped (with the reason in ``detail``)."""

    name: str
    ok: bool | None
    detail: str


@dataclass(frozen=True)
class NodeCheck:
    host: str
    rank: int
    items: tuple[CheckItem, ...]

    @property
    def ok(self) -> bool:
        return all(item.ok is not False for item in self.items)

    def failed(self) -> list[str]:
        return [item.name for item in self.items if item.ok is False]


def disk_command(path: str) -> str:
    """``df`` of the path, or of its nearest existing parent when it does not exist yet."""
    return (f"d={shlex.quote(path)}; while [ ! -e \"$d\" ]; do d=$(dirname \"$d\"); done; "
            'df -Pk "$d"')


def parse_df_available_kib(stdout: str) -> int | None:
    """Available KiB from ``df -Pk`` output (second line, fourth column); None if unreadable."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    fields = lines[-1].split()
    try:
        return int(fields[3])
    except (IndexError, ValueError):
        return None


def disk_item(result: NodeResult, path: str, min_free_gib: float) -> CheckItem:
    if not result.ok:
        return CheckItem("disk", False, f"df {path}: {_why(result)}")
    kib = parse_df_available_kib(result.stdout)
    if kib is None:
        return CheckItem("disk", False, f"cannot read df output for {path}")
    gib = kib / (1024 * 1024)
    if gib < min_free_gib:
        return CheckItem("disk", False, f"{gib:.1f} GiB free in {path}, need {min_free_gib:g}")
    return CheckItem("disk", True, f"{gib:.1f} GiB free in {path}")


def _why(result: NodeResult) -> str:
    detail = last_line(result.stderr) or last_line(result.stdout)
    if result.exit_code is None:
        return (result.error or "failed").split(": ", 1)[-1]
    return f"exit {result.exit_code}" + (f": {detail}" if detail else "")


def _runtime_name(runtime_spec: Any) -> str:
    if runtime_spec is None:
        return "docker"
    if isinstance(runtime_spec, str):
        return runtime_spec
    if hasattr(runtime_spec, "model_dump"):
        runtime_spec = runtime_spec.model_dump()
    value = runtime_spec.get("name") if isinstance(runtime_spec, dict) else getattr(runtime_spec, "name", None)
    return value or "docker"


def check_nodes(hosts: Hosts, runtime_spec: Any, image: str | None, log_dir: str,
                visible_check: str, *, min_free_gib: float = 10.0,
                timeout: float = 30.0) -> list[NodeCheck]:
    """Run every check on every node; a node that fails SSH skips the rest, with that reason."""
    runtime = _runtime_name(runtime_spec)
    items: list[list[CheckItem]] = [[] for _ in hosts.nodes]
    reachable: list[int] = []
    for i, r in enumerate(hosts.run("true", timeout=timeout)):
        items[i].append(CheckItem("ssh", r.ok, "ok" if r.ok else _why(r)))
        if r.ok:
            reachable.append(i)
        else:
            items[i] += [CheckItem(name, None, "skipped: no SSH") for name in CHECKS[1:]]

    def each(indices: list[int], command: str) -> list[tuple[int, NodeResult]]:
        if not indices:
            return []
        view = hosts if len(indices) == len(hosts) else hosts.subset(indices)
        return list(zip(indices, view.run(command, timeout=timeout)))

    docker_ok = list(reachable)
    if runtime == "docker":
        docker_ok = []
        for i, r in each(reachable, dc.version_command()):
            items[i].append(CheckItem("docker", r.ok, f"server {r.stdout.strip()}" if r.ok else _why(r)))
            if r.ok:
                docker_ok.append(i)
        if image:
            for i, r in each(docker_ok, dc.image_present_command(image)):
                items[i].append(CheckItem("image", r.ok, image if r.ok else f"{image} not present "
                                          "(the launch will pull or load it)"))
        for i in reachable:
            if i not in docker_ok:
                items[i].append(CheckItem("image", None, "skipped: docker not usable"))
            elif not image:
                items[i].append(CheckItem("image", None, "skipped: no image configured"))
    else:
        for i in reachable:
            items[i] += [CheckItem("docker", None, f"skipped: runtime {runtime}"),
                         CheckItem("image", None, f"skipped: runtime {runtime}")]
    for i, r in each(reachable, visible_check):
        items[i].append(CheckItem("gpus", r.ok, visible_check if r.ok else
                                  f"`{visible_check}` failed: {_why(r)}"))
    for i, r in each(reachable, disk_command(log_dir)):
        items[i].append(disk_item(r, log_dir, min_free_gib))
    order = {name: k for k, name in enumerate(CHECKS)}
    return [NodeCheck(n.name, n.rank, tuple(sorted(its, key=lambda it: order[it.name])))
            for n, its in zip(hosts.nodes, items)]


def _mark(item: CheckItem) -> str:
    return {True: "ok", False: "FAIL", None: "-"}[item.ok]


def format_check_table(checks: Sequence[NodeCheck]) -> str:
    """A plain-text table (node x check) followed by one line per failed or skipped check."""
    header = ["node", *CHECKS, "result"]
    rows = [[c.host, *(_mark(i) for i in c.items), "PASS" if c.ok else "FAIL"] for c in checks]
    widths = [max(len(str(r[k])) for r in [header, *rows]) for k in range(len(header))]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip() for r in [header, *rows]]
    notes = [f"  {c.host}: {i.name}: {i.detail}" for c in checks for i in c.items if i.ok is not True]
    if notes:
        lines += ["", "details:", *notes]
    return "\n".join(lines)

