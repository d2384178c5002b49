"""amdgpu faults in a node's kernel log: one ordered table of rules, the first that matches wins.

Only lines that name the amdgpu driver are looked at (``amdgpu 0000:c1:00.0: amdgpu: ...``,
``[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ...``), so a NIC or filesystem message can never be
mistaken for a GPU fault. Informational amdgpu lines (``XGMI: Add node``, ``RAS: optional ras
ta ucode is not available``) match no rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Literal

Severity = Literal["fail", "warn"]
_AMDGPU = re.compile(r"amdgpu", re.IGNORECASE)
_TIMESTAMP = re.compile(r"^\[\s*(\d+\.\d+)\]\s?")


@dataclass(frozen=True)
class KernelRule:
    name: str
    severity: Severity
    what: str
    pattern: re.Pattern[str]


def _rule(name: str, severity: Severity, what: str, pattern: str) -> KernelRule:
    return KernelRule(name, severity, what, re.compile(pattern, re.IGNORECASE))


KERNEL_RULES: tuple[KernelRule, ...] = (
    _rule("gpu_reset", "fail", "GPU reset",
          r"GPU reset|gpu_recover|GPU recovery disabled|MODE[12] reset|BACO reset|ASIC reset|"
          r"GPU hang|cp might be in an unrecoverable state"),
    _rule("ring_timeout", "fail", "ring timeout",
          r"\bring \S+ timeout|amdgpu_job_timedout|fence wait loop timeout|preemption time ?out"),
    _rule("page_fault", "fail", "GPU page fault",
          r"page fault|PROTECTION_FAULT_STATUS|Illegal register access"),
    _rule("ras_correctable", "warn", "RAS correctable error",
          r"(?<!un)correctable (hardware )?errors? detected"),
    _rule("xgmi_error", "fail", "XGMI error", r"xgmi.*(error|fail)|(error|fail).*xgmi"),
    _rule("ras_uncorrectable", "fail", "RAS uncorrectable error",
          r"uncorrectable|poison (consumption|created|detected)|ERR_FATAL"),
    _rule("driver_fatal", "fail", "amdgpu fatal error", r"fatal error"),
)


@dataclass(frozen=True)
class KernelFinding:
    """One kernel-log line of one node that a rule matched."""

    node: str
    rule: str
    severity: Severity
    what: str
    line: str

    def describe(self) -> str:
        return f"node {self.node}: {self.what}: {self.line}"


def classify_line(line: str) -> KernelRule | None:
    """The first rule that matches an amdgpu line, or None."""
    if not _AMDGPU.search(line):
        return None
    text = _TIMESTAMP.sub("", line, count=1)
    for rule in KERNEL_RULES:
        if rule.pattern.search(text):
            return rule
    return None


def scan_kernel_lines(node: str, lines: Iterable[str]) -> list[KernelFinding]:
    """Every matching line of one node's kernel log window, in log order."""
    found = []
    for raw in lines:
        line = raw.rstrip("\r\n")
        rule = classify_line(line)
        if rule is not None:
            found.append(KernelFinding(node, rule.name, rule.severity, rule.what, line.strip()))
    return found


def line_time(line: str) -> float | None:
    """The ``[  123.456789]`` seconds-since-boot stamp that dmesg and ``journalctl -o
    short-monotonic`` put first, or None."""
    m = _TIMESTAMP.match(line)
    return float(m.group(1)) if m else None
