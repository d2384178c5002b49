"""What the image's launcher script and the node's RDMA links say, asked before a run (no I/O here).

Which env names a ROCm example script reads changes between images (docs/launch_contracts.md#llama-launcher: only the
2026 ``train_llama3.sh`` reads ``TE_FP4`` / ``TE_FP8_RECIPE``; the Feb-2025 one ignores
``DATA_CACHE_PATH``), and the image tag does not say which script it holds. So the script itself
is asked: one ``grep`` per name on its non-comment lines. The RDMA links come from ``ibv_devinfo`` on
the node's own shell (as ``cluster.check`` reads the NIC firmware): its active ports.

The commands print marker lines; the parsers take any text (an error, garbage, nothing) and return
what it tells, leaving the rest unknown, so a confused node never crashes a load.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cvs_tasks.jobs.shell import q

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
