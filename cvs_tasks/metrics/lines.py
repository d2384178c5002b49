"""Rare lines that still matter: the arguments dump, Primus set-up lines, the ROCm launcher
summary, completion banners and validation losses.

``ANCHORS`` are lower-case substrings one of which every such line holds; the parser hands only
lines with an anchor to ``LineFacts.read``, so these readers never see the bulk of a log.
Launcher prefixes (``[rank3]:``, ``0: [default0]:``, ``localhost: ``, ``10.1.2.3: ``, Primus
loguru headers) are tolerated everywhere: each pattern looks for its text anywhere in the line.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from cvs_tasks.metrics import catalog

SUMMARY_LABELS = tuple(catalog.summary_labels().values())  # the launcher's summary lines, from the catalog
ANCHORS: tuple[str, ...] = (
    " ..", "arguments", *(f"{label}:" for label in SUMMARY_LABELS), "training completed", "finished successfully",
    "seq_len:", "world_size=", "primus", "validation",
)
# Megatron-LM / DeepSpeed: "------ arguments ------", "  name ....... value", "--- end of arguments ---";
# Primus logs the same lines through loguru with an "arguments.py:<line>] :" tag.
_DUMP_START = re.compile(r"-{3,} arguments -{3,}")
_DUMP_END = re.compile(r"-{3,} end of arguments -{3,}")
_ARG = re.compile(r"(?:^|[\s:\]])([A-Za-z_][\w.-]*) \.{2,}(?: (.*?))?\s*$")
_SUMMARY = re.compile(
    rf"(?:^|[\s:\]])({'|'.join(map(re.escape, SUMMARY_LABELS))}):\s+([-+]?[\w.]+)\s*$", re.IGNORECASE)
_PRIMUS_SEQ = re.compile(r"seq_len:\s*(\d+)\s+world_size:\s*(\d+)")
_PRIMUS_WORLD = re.compile(r"\[Primus:Env\][^\n]*\bworld_size=(\d+)")
_VALIDATION = re.compile(
    r"\bvalidation(?:-[\w.-]+)? loss at iteration (\d+)[^|]*\|\s*lm loss value:\s*([\w.+-]+)")
_PRIMUS_HINTS = ("[primus:", "primus/", "[patch:megatron", "primusmaster", "primus launcher", "][rank-")
_COMPLETION = (("Training completed.", "training completed."),
               ("torchrun finished successfully", "torchrun finished successfully"))


@dataclass
class LineFacts:
    """What the rare lines told us so far, in file order."""

    args: dict[str, str] = field(default_factory=dict)
    launcher_summary: dict[str, float] = field(default_factory=dict)
    eval_losses: dict[int, float] = field(default_factory=dict)
    primus_seq: int | None = None
    primus_world: int | None = None
    completion_marker: str | None = None
    primus_evidence: bool = False
    in_dump: bool = False
    dump_done: bool = False  # the dump's end line was read: every argument is known

    def read(self, line: str, lower: str) -> bool:
        """Take what a line says; True when it was one of the known kinds."""
        if any(h in lower for h in _PRIMUS_HINTS):
            self.primus_evidence = True
        for text, low in _COMPLETION:
            if low in lower and text in line:
                self.completion_marker = self.completion_marker or text
                self.primus_evidence = True
                return True
        if "arguments" in lower:
            if _DUMP_END.search(line):
                self.in_dump, self.dump_done = False, True
                return True
            if _DUMP_START.search(line):
                self.in_dump = True
                return True
        if " .." in line and (self.in_dump or "arguments.py:" in lower):
            m = _ARG.search(line)
            if m:
                self.args[m.group(1)] = (m.group(2) or "").strip()
                return True
        return self._read_other(line, lower)

    def _read_other(self, line: str, lower: str) -> bool:
        if ":" in line and any(label in lower for label in SUMMARY_LABELS):
            m = _SUMMARY.search(line)
            if m:
                key, value = m.group(1).lower(), _number(m.group(2))
                if value is None:
                    return False
                # several nodes print the summary; a NaN one never replaces a finite value
                if math.isfinite(value) or key not in self.launcher_summary:
                    self.launcher_summary[key] = value
                return True
        m = _PRIMUS_SEQ.search(line) if "seq_len:" in lower else None
        if m:
            self.primus_seq, self.primus_world = int(m.group(1)), int(m.group(2))
            self.primus_evidence = True
            return True
        m = _PRIMUS_WORLD.search(line) if "world_size=" in lower else None
        if m:
            self.primus_world = self.primus_world or int(m.group(1))
            self.primus_evidence = True
            return True
        m = _VALIDATION.search(line) if "validation" in lower and "on test set" not in lower else None
        if m:
            value = _number(m.group(2))
            if value is not None and len(m.group(1)) <= 18:
                self.eval_losses[int(m.group(1))] = value
            return value is not None
        return False

    def arg_int(self, key: str) -> int | None:
        value = _number(self.args.get(key, ""))
        return int(value) if value is not None and math.isfinite(value) and abs(value) < 2**62 else None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None
