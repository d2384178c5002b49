"""A backend's launch contracts: what its launcher cannot do, refused at load, and what the image
and the nodes must confirm before a run, asked of them (docs/launch_contracts.md).

Refused at load (exit 2): ``contract_problems`` asks the suite's backend
(``Backend.contract_problems``; Megatron-LM's family scripts that pin one node or cap the
iterations, ``cvs_tasks/jobs/megatron.py``), so what would only show as wrong numbers after the run
is a config error naming the setting to change.

Asked before a run: which env names a ROCm example script reads changes between images
(docs/launch_contracts.md#llama-launcher: only the 2026 ``train_llama3.sh`` reads ``TE_FP4`` /
``TE_FP8_RECIPE``; the Feb-2025 one ignores ``DATA_CACHE_PATH``), and the image tag does not say
which script it holds. ``launcher_needs`` says what to ask (``Need``); the probe asks the script
itself (one ``grep`` per name on its non-comment lines) and counts the node's active RDMA links with
``ibv_devinfo`` on the node's own shell; ``launcher_findings`` turns the answer into problems
(exit 2) and warnings (could not tell). The commands print marker lines; the parsers take any text
(an error, garbage, nothing) and return what it tells, leaving the rest unknown, so a confused node
never crashes a load. No I/O here: ``remote.launcher`` runs the probe.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cvs_tasks import backends
from cvs_tasks.config.errors import Problem
from cvs_tasks.jobs.shell import q

if TYPE_CHECKING:
    from cvs_tasks.config import Suite


def contract_problems(suite: Suite, *, distributed: bool) -> list[Problem]:
    """What the suite's backend refuses at load (``Backend.contract_problems``)."""
    return backends.get(suite.backend).contract_problems(suite, distributed=distributed)


def launcher_needs(suite: Suite, *, distributed: bool) -> list[Need]:
    """What the suite's backend asks the image and the nodes before a run (``Backend.launcher_needs``)."""
    return backends.get(suite.backend).launcher_needs(suite, distributed=distributed)


@dataclass(frozen=True)
class Need:
    """One thing the image or the nodes must confirm before the run; ``refuse`` False: a warning."""

    where: str  # the setting that asks for it (dotted path)
    script: str  # the launcher's path in the image
    name: str = ""  # an env name the script must read
    links: int = 0  # active RDMA links every node must have
    refuse: bool = True
    otherwise: str = ""  # what happens when it does not hold


def scripts_to_probe(needs: list[Need]) -> dict[str, tuple[str, ...]]:
    """Script path -> the env names to ask it about (the probe's question)."""
    out: dict[str, tuple[str, ...]] = {}
    for need in needs:
        if need.name:
            out[need.script] = tuple(dict.fromkeys((*out.get(need.script, ()), need.name)))
    return out


def launcher_findings(needs: list[Need], answer: ProbeAnswer) -> tuple[list[Problem], list[str]]:
    """Problems (the run would not train what the config says: exit 2) and warnings (it could
    not be told, or the run still trains what was asked), every one at once."""
    problems: list[Problem] = []
    warnings: list[str] = []
    for need in needs:
        script = need.script.rsplit("/", 1)[-1]
        if need.links:
            for node, count in answer.links.items():
                if count is None:
                    warnings.append(f"cannot count the active RDMA links on node {node} (ibv_devinfo gave no "
                                    f"device list): {script} {need.otherwise}; check `ibv_devinfo` on that node")
                elif count < need.links:
                    problems.append((need.where, f"node {node} has {count} active RDMA link(s) (ibv_devinfo), "
                                     f"but {script} {need.otherwise}; run it on nodes with {need.links} active RDMA "
                                     "ports, or use a Primus image"))
            continue
        facts = answer.scripts.get(need.script)
        if facts is None:
            why = answer.unknown or "no answer from node 0"
            warnings.append(f"{need.where}: not checked whether {need.script} reads {need.name} ({why}); if it "
                            f"does not: {need.otherwise}")
        elif not facts.present:
            warnings.append(f"{need.where}: {need.script} is not in the image (train_params.megatron_root?); "
                            f"whether it reads {need.name} was not checked")
        elif need.name in facts.ignores:
            text = f"{need.script} in this image does not read {need.name}: {need.otherwise}"
            if need.refuse:
                problems.append((need.where, text))
            else:
                warnings.append(f"{need.where}: {text}")
        elif need.name not in facts.reads:
            warnings.append(f"{need.where}: the answer about {need.script} does not say whether it reads "
                            f"{need.name}; if it does not: {need.otherwise}")
    return list(dict.fromkeys(problems)), list(dict.fromkeys(warnings))


# --- the probe: its commands and what their answers tell -------------------------------------
MARK = "@@cvs-launcher"
LINKS_COMMAND = "ibv_devinfo"
MAX_SCRIPT_BYTES = 1 << 20  # a launcher script is a few KiB
_ACTIVE_PORT = re.compile(r"^\s*state:\s*PORT_ACTIVE\b", re.MULTILINE)
_HCA = re.compile(r"^\s*hca_id:\s*\S+", re.MULTILINE)
_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class ScriptFacts:
    """One launcher as the image holds it: present or not, and which of the asked names it reads."""

    present: bool
    reads: frozenset[str] = frozenset()
    ignores: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ProbeAnswer:
    """Everything the nodes told. A script or node left out could not be asked (``unknown`` says why)."""

    scripts: dict[str, ScriptFacts] = field(default_factory=dict)  # path in the image -> facts
    links: dict[str, int | None] = field(default_factory=dict)  # node -> active RDMA ports (None: cannot tell)
    unknown: str = ""  # why the scripts were not read (no image on the node, no answer, ...)


def reads_pattern(name: str) -> str:
    """ERE for a non-comment line that expands ``$NAME`` / ``${NAME…}`` or assigns ``NAME=``."""
    if not _NAME.match(name):
        raise ValueError(f"not an env name: {name!r}")
    return rf"^[^#]*(\$\{{?{name}([^A-Za-z0-9_]|$)|(^|[^A-Za-z0-9_]){name}=)"


def script_probe_command(scripts: Mapping[str, Sequence[str]]) -> str:
    """Run where the script lives (the image): per script ``present``/``missing``, then per name
    ``reads``/``ignores``; each line is ``@@cvs-launcher <word> [<name>] <path>``. Only a regular
    file counts, and only its first ``MAX_SCRIPT_BYTES`` are read (a device or a FIFO never hangs it)."""
    parts = []
    for path, names in scripts.items():
        checks = "".join(
            f"if head -c {MAX_SCRIPT_BYTES} -- {q(path)} | grep -Eq -- {q(reads_pattern(name))}; then "
            f"echo {q(f'{MARK} reads {name} {path}')}; else echo {q(f'{MARK} ignores {name} {path}')}; fi; "
            for name in names)
        parts.append(f"if [ -f {q(path)} ] && [ -r {q(path)} ]; then echo {q(f'{MARK} present {path}')}; {checks}"
                     f"else echo {q(f'{MARK} missing {path}')}; fi")
    return "; ".join(parts) + "; true" if parts else "true"


def links_probe_command() -> str:
    """Run on the node's own shell: ``ibv_devinfo``'s exit status and output under a marker."""
    return (f"out=$({LINKS_COMMAND} 2>&1); rc=$?; printf '%s %s %s\\n%s\\n' {MARK} links \"$rc\" \"$out\"")


def parse_scripts(text: str) -> dict[str, ScriptFacts]:
    """``script_probe_command`` output -> path -> facts; lines it does not know are ignored."""
    present: dict[str, bool] = {}
    reads: dict[str, set[str]] = {}
    ignores: dict[str, set[str]] = {}
    for line in text.splitlines():
        words = line.strip().split(" ", 3)
        if len(words) < 3 or words[0] != MARK:
            continue
        if words[1] in ("present", "missing"):
            present[" ".join(words[2:])] = words[1] == "present"
        elif words[1] in ("reads", "ignores") and len(words) == 4 and _NAME.match(words[2]):
            (reads if words[1] == "reads" else ignores).setdefault(words[3], set()).add(words[2])
    return {path: ScriptFacts(ok, frozenset(reads.get(path, set())) if ok else frozenset(),
                              frozenset(ignores.get(path, set()) - reads.get(path, set())) if ok else frozenset())
            for path, ok in present.items()}


def parse_links(text: str) -> int | None:
    """Active RDMA ports from ``links_probe_command`` output; None when the node cannot tell
    (no ``ibv_devinfo``, an error, output that lists no device in a form known here)."""
    head, _, out = text.partition(f"{MARK} links ")
    if not _:
        return None
    code, _, rest = out.partition("\n")
    if code.strip() != "0":
        return None
    if _HCA.search(rest):
        return len(_ACTIVE_PORT.findall(rest))
    return 0 if "no ib devices found" in rest.lower() else None
