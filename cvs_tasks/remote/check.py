"""``cluster.check``: can every node run a job? SSH, Docker, image, GPUs, free disk — with reasons.

I/O is one command per node that runs every probe (``probe_command``); parsing and the table are pure.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from cvs_tasks import runtimes
from cvs_tasks.remote import docker_cmd as dc
from cvs_tasks.remote.fingerprint import (  # noqa: F401 - PROBE_MARK re-exported for the probe's readers
    PROBE_MARK,
    drift,
    fingerprint_probes,
    framed,
    parse_fingerprint,
    parse_probe,
)
from cvs_tasks.remote.hosts import Hosts
from cvs_tasks.remote.results import NodeResult, last_line
from cvs_tasks.terminal import visible

CHECKS = ("ssh", "docker", "image", "gpus", "disk", "versions")


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
    facts: dict = field(default_factory=dict, compare=False)  # the node's fingerprint

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
        return runtimes.DEFAULT
    if isinstance(runtime_spec, str):
        return runtime_spec
    if hasattr(runtime_spec, "model_dump"):
        runtime_spec = runtime_spec.model_dump()
    value = runtime_spec.get("name") if isinstance(runtime_spec, dict) else getattr(runtime_spec, "name", None)
    return value or runtimes.DEFAULT


def uses_node_docker(runtime: str) -> bool:
    """Ask the node's docker only for a runtime that keeps its image there (a cluster file's
    container block is not checked before `cluster.check`: an unknown name asks nothing of docker)."""
    kind = runtimes.find(runtime)
    return kind is not None and kind.node_docker


def probe_command(runtime: str, image: str | None, log_dir: str, visible_check: str) -> str:
    """One shell command that runs every probe and prints each one's exit status and output.

    One round trip per node instead of one per check: on a large cluster the SSH sessions and
    the node's own process start-ups, not the checks, are what costs.
    """
    probes = []
    if uses_node_docker(runtime):
        probes.append(("docker", dc.version_command()))
        if image:
            probes.append(("image", dc.image_present_command(image)))
    probes += [("gpus", visible_check), ("disk", disk_command(log_dir))]
    return framed(probes + fingerprint_probes(runtime, image))


def check_nodes(hosts: Hosts, runtime_spec: Any, image: str | None, log_dir: str,
                visible_check: str, *, min_free_gib: float = 10.0,
                timeout: float = 30.0) -> list[NodeCheck]:
    """Run every check on every node; a node that fails SSH skips the rest, with that reason."""
    runtime = _runtime_name(runtime_spec)
    command = probe_command(runtime, image, log_dir, visible_check)
    checks = [_node_check(node, result, runtime, image, log_dir, visible_check, min_free_gib)
              for node, result in zip(hosts.nodes, hosts.run(command, timeout=timeout))]
    return with_drift(checks)


def with_drift(checks: list[NodeCheck]) -> list[NodeCheck]:
    """Add the ``versions`` item: does the node's fingerprint match the majority's?"""
    found: dict[str, list[str]] = {}
    for d in drift({c.host: c.facts for c in checks}):
        found.setdefault(d.host, []).append(d.text)
    out = []
    for c in checks:
        if any(i.name == "versions" for i in c.items):
            out.append(c)
            continue
        if not c.facts:
            item = CheckItem("versions", None, "skipped: the node told no versions")
        elif c.host in found:
            item = CheckItem("versions", False, "drift: " + "; ".join(found[c.host]))
        else:
            item = CheckItem("versions", True, ", ".join(f"{k} {v}" for k, v in c.facts.items()))
        out.append(replace(c, items=c.items + (item,)))
    return out


def _node_check(node, result: NodeResult, runtime: str, image: str | None, log_dir: str,
                visible_check: str, min_free_gib: float) -> NodeCheck:
    probes = parse_probe(result.stdout) if result.ok else {}
    if not probes:
        items = [CheckItem("ssh", False, _why(result) if not result.ok else "no answer from the node's shell")]
        items += [CheckItem(name, None, "skipped: no SSH") for name in CHECKS[1:-1]]
        items.append(CheckItem("versions", None, "skipped: no SSH"))
        return NodeCheck(node.name, node.rank, tuple(items))

    def probe(name: str) -> NodeResult:
        code, out = probes.get(name, (127, f"{name} probe did not run"))
        return NodeResult(result.host, result.rank, code == 0, code, out if code == 0 else "", out,
                          None if code == 0 else f"exit status {code}")

    items = [CheckItem("ssh", True, "ok")]
    if not uses_node_docker(runtime):
        items += [CheckItem("docker", None, f"skipped: runtime {runtime}"),
                  CheckItem("image", None, f"skipped: runtime {runtime}")]
    else:
        docker = probe("docker")
        items.append(CheckItem("docker", docker.ok, f"server {docker.stdout.strip()}" if docker.ok else _why(docker)))
        if not docker.ok:
            items.append(CheckItem("image", None, "skipped: docker not usable"))
        elif not image:
            items.append(CheckItem("image", None, "skipped: no image configured"))
        else:
            items.append(CheckItem("image", probe("image").ok, image if probe("image").ok else
                                   f"{image} not present (the launch will pull or load it)"))
    gpus = probe("gpus")
    items.append(CheckItem("gpus", gpus.ok, visible_check if gpus.ok else f"`{visible_check}` failed: {_why(gpus)}"))
    items.append(disk_item(probe("disk"), log_dir, min_free_gib))
    return NodeCheck(node.name, node.rank, tuple(items), parse_fingerprint(probes))


def _mark(item: CheckItem) -> str:
    return {True: "ok", False: "FAIL", None: "-"}[item.ok]


def format_check_table(checks: Sequence[NodeCheck]) -> str:
    """A plain-text table (node x check) followed by one line per failed or skipped check; node text
    (host names, details from the node) with its control characters shown, a line per field."""
    header = ["node", *CHECKS, "result"]
    rows = [[visible(c.host), *(_mark(i) for i in c.items), "PASS" if c.ok else "FAIL"] for c in checks]
    widths = [max(len(str(r[k])) for r in [header, *rows]) for k in range(len(header))]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip() for r in [header, *rows]]
    notes = [visible(f"  {c.host}: {i.name}: {i.detail}") for c in checks for i in c.items if i.ok is not True]
    if notes:
        lines += ["", "details:", *notes]
    return "\n".join(lines)

