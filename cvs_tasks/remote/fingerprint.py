"""Node fingerprints: GPU model and count, ROCm, amdgpu driver and GPU firmware, kernel, NIC
firmware and the image digest, from one command per node (the ``cluster.check`` probe framing).

Each fact has one probe (a shell snippet run on the node) and one parser (pure); both are rows of
``FACTS``. A tool that is missing gives no value, never an error: the fingerprint records what the
node can tell.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass
from typing import Callable

from cvs_tasks import runtimes
from cvs_tasks.remote.hosts import Hosts

ROCM_PATH = 'PATH="$PATH:/opt/rocm/bin"'
IMAGE_FORMAT = '{{join .RepoDigests ","}}\n{{join .RootFS.Layers ","}}'

# Probe framing (named shell probes, each output under a marker line): the node check and the fingerprint share it.
PROBE_MARK = "@@cvs-check"


def framed(probes: list[tuple[str, str]]) -> str:
    """Run each (name, command) in turn and print its exit status and output under a marker line."""
    parts = [f"out=$( {{ {cmd} ; }} 2>&1 ); rc=$?; printf '%s %s %s\\n%s\\n' {PROBE_MARK} {name} \"$rc\" \"$out\""
             for name, cmd in probes]
    return "; ".join(parts) + "; true"


def parse_probe(stdout: str) -> dict[str, tuple[int, str]]:
    """``probe_command`` output -> probe name -> (exit status, output)."""
    found: dict[str, tuple[int, str]] = {}
    name, code, lines = None, 0, []
    for line in stdout.splitlines() + [f"{PROBE_MARK} end 0"]:
        head = line.split(" ")
        if len(head) == 3 and head[0] == PROBE_MARK and head[2].lstrip("-").isdigit():
            if name is not None:
                found[name] = (code, "\n".join(lines))
            name, code, lines = head[1], int(head[2]), []
        elif name is not None:
            lines.append(line)
    return found


def _first(pattern: str) -> Callable[[str], str | None]:
    rx = re.compile(pattern, re.IGNORECASE | re.MULTILINE)

    def parse(out: str) -> str | None:
        m = rx.search(out)
        return m.group(1).strip() if m else None
    return parse


def _plain(out: str) -> str | None:
    line = next((ln.strip() for ln in out.splitlines() if ln.strip()), "")
    return line or None


def _labelled_or_bare(pattern: str, out: str) -> str | None:
    """The labelled value of a tool's output, or a bare version file's one token."""
    labelled = _first(pattern)(out)
    if labelled:
        return labelled
    bare = _plain(out)
    return bare if bare and " " not in bare and ":" not in bare else None


def _gpu_count(out: str) -> int | None:
    n = len(set(re.findall(r"^GPU:\s*(\d+)\s*$", out, re.MULTILINE)))
    return n or None


def _gpu_model(out: str) -> str | None:
    names = sorted(set(m.strip() for m in re.findall(r"MARKET_NAME:\s*(.+)$", out, re.MULTILINE)))
    return " / ".join(names) or None


def _pairs(id_rx: str, ver_rx: str) -> Callable[[str], str | None]:
    """``ID=VERSION`` pairs across every device, one value per id (``a/b`` when devices differ)."""
    def parse(out: str) -> str | None:
        found: dict[str, set[str]] = {}
        ident = None
        for line in out.splitlines():
            m = re.search(id_rx, line)
            if m:
                ident = m.group(1).strip()
                continue
            m = re.search(ver_rx, line)
            if m and ident:
                found.setdefault(ident, set()).add(m.group(1).strip())
        return ",".join(f"{k}={'/'.join(sorted(v))}" for k, v in sorted(found.items())) or None
    return parse


def _nic_fw(out: str) -> str | None:
    versions = sorted(set(re.findall(r"fw_ver:\s*(\S+)", out)))
    return "/".join(versions) or None


@dataclass(frozen=True)
class Fact:
    name: str
    probes: tuple[str, ...]  # PROBES entries whose output may hold it, the first that does wins
    parse: Callable[[str], object]


# One shell snippet per tool call; amd-smi is slow on real nodes, so one call serves three facts
# and cheap files (sysfs, the ROCm version file) are read first where they exist.
PROBES: dict[str, str] = {
    "asic": f"{ROCM_PATH} amd-smi static --asic --driver",
    "rocm": f"cat /opt/rocm/.info/version 2>/dev/null || {ROCM_PATH} amd-smi version",
    "driver": "cat /sys/module/amdgpu/version",
    "firmware": f"{ROCM_PATH} amd-smi firmware",
    "kernel": "uname -r",
    "nic": "ibv_devinfo",
}
FACTS: tuple[Fact, ...] = (
    Fact("gpu_model", ("asic",), _gpu_model),
    Fact("gpu_count", ("asic",), _gpu_count),
    Fact("rocm", ("rocm",), lambda out: _labelled_or_bare(r"ROCm version:\s*([^|\n]+)", out)),
    Fact("driver", ("driver", "asic"),
         lambda out: _labelled_or_bare(r"DRIVER:\s*\n\s*NAME:[^\n]*\n\s*VERSION:\s*(\S+)", out)),
    Fact("gpu_fw", ("firmware",), _pairs(r"FW_ID:\s*(\S+)", r"FW_VERSION:\s*(\S+)")),
    Fact("kernel", ("kernel",), _plain),
    Fact("nic_fw", ("nic",), _nic_fw),
)
FACT_NAMES = tuple(f.name for f in FACTS) + ("image_digest",)
PREFIX = "fp_"


def fingerprint_probes(runtime: str, image: str | None) -> list[tuple[str, str]]:
    """(probe name, shell snippet) pairs, named ``fp_<probe>`` so they ride along other probes."""
    probes = [(PREFIX + name, cmd) for name, cmd in PROBES.items()]
    kind = runtimes.find(runtime)
    if image and kind is not None and kind.node_docker:  # the node's docker holds the image
        probes.append((PREFIX + "image_digest", shlex.join(["docker", "image", "inspect", "--format",
                                                            IMAGE_FORMAT, image])))
    return probes


def parse_fingerprint(probes: dict[str, tuple[int, str]]) -> dict[str, object]:
    """Probe name -> (exit status, output) -> fact -> value (facts the node could not tell are left out)."""
    facts: dict[str, object] = {}
    for fact in FACTS:
        for name in fact.probes:
            code, out = probes.get(PREFIX + name, (127, ""))
            value = fact.parse(out) if code == 0 else None
            if value not in (None, ""):
                facts[fact.name] = value
                break
    code, out = probes.get(PREFIX + "image_digest", (127, ""))
    digest = image_digest(out) if code == 0 else None
    if digest:
        facts["image_digest"] = digest
    return facts


def image_digest(out: str) -> str | None:
    """The registry digest the image was pulled by; else a digest of its layer contents (an image
    imported or built on the node has no registry digest, and its id embeds its creation time)."""
    lines = out.rstrip("\n").split("\n")
    repo, layers = lines[0].strip(), (lines[1] if len(lines) > 1 else "")
    digests = [d.split("@", 1)[1] for d in repo.split(",") if "@" in d]
    if digests:
        return sorted(digests)[0]
    layers = layers.strip()
    return "layers:sha256:" + hashlib.sha256(layers.encode()).hexdigest()[:16] if layers else None


def collect_fingerprints(hosts: Hosts, runtime: str, image: str | None, *, timeout: float = 60.0) -> dict[str, dict]:
    """host -> facts, one command per node; a node that does not answer gets ``{}``."""
    command = framed(fingerprint_probes(runtime, image))
    out: dict[str, dict] = {}
    for node, result in zip(hosts.nodes, hosts.run(command, timeout=timeout)):
        out[node.address or node.name] = parse_fingerprint(parse_probe(result.stdout)) if result.ok else {}
    return out


@dataclass(frozen=True)
class Drift:
    host: str
    fact: str
    value: object
    expected: object
    why: str  # "majority 3 of 4" or "no majority: node 0's value"

    @property
    def text(self) -> str:
        return (f"{self.fact} {self.value if self.value is not None else '(unknown)'} differs from {self.expected} "
                f"({self.why})")


def drift(facts_by_host: dict[str, dict]) -> list[Drift]:
    """Nodes whose facts differ from the majority of the nodes that report that fact.

    Without a strict majority (e.g. two nodes that disagree), the first node (rank 0, the master)
    is the reference, so a two-node cluster still names one node. A node that cannot tell a fact
    the others report is drift too: it may be missing the tool, or the GPU.
    """
    hosts = list(facts_by_host)
    out: list[Drift] = []
    for fact in FACT_NAMES:
        values = {h: facts_by_host[h].get(fact) for h in hosts if facts_by_host[h]}
        known = [v for v in values.values() if v is not None]
        if not known or len(values) < 2:
            continue
        counts: dict[object, int] = {}
        for v in values.values():
            counts[v] = counts.get(v, 0) + 1
        best, n = max(counts.items(), key=lambda kv: (kv[1], kv[0] is not None))
        if best is None and n * 2 > len(values):
            continue  # most nodes cannot tell this fact: nothing to hold the others to
        if n * 2 > len(values):
            expected, why = best, f"majority: {n} of {len(values)} nodes"
        else:
            first = next(h for h, v in values.items() if v is not None)
            expected, why = values[first], f"no majority: compared with {first}"
        out += [Drift(h, fact, v, expected, why) for h, v in values.items() if v != expected]
    return out
