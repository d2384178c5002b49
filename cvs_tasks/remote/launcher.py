"""Ask the image's launcher and the nodes' RDMA links what ``jobs.contracts`` needs to know, one
command per node, before a run (or in ``config.validate --cluster``).

The container is not up yet, so the script is read from the image itself (``docker run --rm``, no
network, only when the image is already on the node: nothing is pulled for a check) where the
node's docker holds the image (``node_docker``), else (the ``host`` runtime) from the node. The
links are counted on the node's own shell.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from cvs_tasks import runtimes
from cvs_tasks.jobs.contracts import (
    MARK,
    ProbeAnswer,
    links_probe_command,
    parse_links,
    parse_scripts,
    script_probe_command,
)
from cvs_tasks.remote import docker_cmd as dc
from cvs_tasks.remote.hosts import Hosts

NO_IMAGE = f"{MARK} no-image"


def in_image(image: str, command: str) -> str:
    """``command`` run in a throw-away container of ``image`` if the node has it, else a marker line."""
    run = shlex.join(["docker", "run", "--rm", "--network", "none", "--entrypoint", "/bin/bash", image, "-c",
                      command])
    return f"if {dc.image_present_command(image)} >/dev/null 2>&1; then {run}; else echo {shlex.quote(NO_IMAGE)}; fi"


def probe_commands(count: int, runtime: str, image: str, scripts: Mapping[str, Sequence[str]],
                   links: bool) -> list[str]:
    """Per node: node 0 reads the scripts where the job will run them; every node counts its links
    when ``links``. An empty string: nothing to ask that node."""
    script = script_probe_command(scripts) if scripts else ""
    if script and runtimes.get(runtime).node_docker:
        script = in_image(image, script)
    tail = links_probe_command() if links else ""
    return ["; ".join(c for c in ((script if i == 0 else ""), tail) if c) for i in range(count)]


def probe_launcher(hosts: Hosts, runtime: str, image: str, scripts: Mapping[str, Sequence[str]], links: bool,
                   *, timeout: float = 120.0) -> ProbeAnswer:
    """Run the probe; a node that does not answer leaves its facts unknown (never an exception)."""
    commands = probe_commands(len(hosts.nodes), runtime, image, scripts, links)
    asked = [i for i, command in enumerate(commands) if command]
    if not asked:
        return ProbeAnswer()
    view = hosts if len(asked) == len(commands) else hosts.subset(asked)
    results = view.run([commands[i] for i in asked], timeout=timeout)
    scripts_found: dict = {}
    link_counts: dict[str, int | None] = {}
    unknown = ""
    for index, result in zip(asked, results):
        lost = result.error if result.exit_code is None else ""  # no answer at all (SSH, timeout)
        if links:
            link_counts[result.host] = None if lost else parse_links(result.stdout)
        if index != 0 or not scripts:
            continue
        if lost:
            unknown = lost if result.host in lost else f"node {result.host}: {lost}"
        elif NO_IMAGE in result.stdout:
            unknown = (f"{image} is not on node {result.host} yet (a run pulls it at launch; nothing is pulled "
                       "for a check)")
        else:
            scripts_found = parse_scripts(result.stdout)
            if not scripts_found:
                detail = (result.stderr or result.stdout).strip()[-200:] or "no output"
                unknown = f"node {result.host} gave no answer about the launcher ({detail})"
    return ProbeAnswer(scripts_found, link_counts, unknown)
