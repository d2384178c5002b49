"""Rare non-iteration lines that still matter: the arguments dump, Primus set-up lines, the ROCm
launcher summary, completion banners and validation losses.

``MARKER_ANCHORS`` are lower-case substrings that a line of each kind contains; the parser only
looks at lines holding an anchor (or a signature anchor), so these readers never see the bulk of
a log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MARKER_ANCHORS: tuple[str, ...] = (
    "elapsed time per iteration", " ...", "throughput per gpu:", "tokens/gpu/s:", "mem usages:",
    "training completed", "finished successfully", "seq_len:", "world_size=", "primus",
    "validation", "\ufffd", "\x00",
)
ARG_KEYS = frozenset({
    "seq_length", "global_batch_size", "micro_batch_size", "tensor_model_parallel_size",
    "pipeline_model_parallel_size", "context_parallel_size", "world_size", "train_iters",
    "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups",
    "group_query_attention", "kv_channels", "padded_vocab_size", "vocab_size", "swiglu",
    "data_parallel_size", "expert_model_parallel_size", "log_interval", "save_interval",
})
_ARG_RE = re.compile(r"^\s*([A-Za-z_]\w*) \.{3,} (.*?)\s*$")
_SUMMARY_RE = re.compile(
    r"^\s*(throughput per GPU|elapsed time per iteration|tokens/GPU/s|mem usages):\s+([\w.+-]+)\s*$",
    re.IGNORECASE,
)
_PRIMUS_SEQ_RE = re.compile(r"seq_len:\s*(\d+)\s+world_size:\s*(\d+)")
_PRIMUS_WORLD_RE = re.compile(r"\[Primus:Env\][^\n]*\bworld_size=(\d+)")
_VALIDATION_RE = re.compile(
    r"\bvalidation(?:-[\w.-]+)? loss at iteration (\d+)[^|]*\|\s*lm loss value:\s*([\w.+-]+)"
)
_PRIMUS_HINTS = ("[primus:", "primus/", "[patch:megatron", "primusmaster")


@dataclass
class LineFacts:
    """What the rare lines told us so far (order-free: the same whatever the chunking)."""

    args: dict[str, str] = field(default_factory=dict)
    launcher_summary: dict[str, float] = field(default_factory=dict)
    eval_losses: dict[int, float] = field(default_factory=dict)
    primus_seq: int | None = None
    primus_world: int | None = None
    completion_marker: str | None = None
    primus_evidence: bool = False

    def read(self, line: str, lower: str) -> bool:
        """Take what a line says; True when it was one of the known kinds."""
        if any(h in lower for h in _PRIMUS_HINTS) or "training completed." in lower:
            self.primus_evidence = True
        if "training completed." in lower and "Training completed." in line:
            self.completion_marker = self.completion_marker or "Training completed."
            return True
        if "torchrun finished successfully" in lower:
            self.completion_marker = self.completion_marker or "torchrun finished successfully"
            self.primus_evidence = True
            return True
        if " ..." in line:
            m = _ARG_RE.match(line)
            if m and m.group(1) in ARG_KEYS:
                self.args[m.group(1)] = m.group(2)
                return True
        if ":" in line:
            m = _SUMMARY_RE.match(line)
            if m:
                try:
                    self.launcher_summary[m.group(1).lower()] = float(m.group(2))
                except ValueError:
                    return False
                return True
        if "seq_len:" in lower:
            m = _PRIMUS_SEQ_RE.search(line)
            if m:
                self.primus_seq, self.primus_world = int(m.group(1)), int(m.group(2))
                self.primus_evidence = True
                return True
        if "world_size=" in lower:
            m = _PRIMUS_WORLD_RE.search(line)
            if m:
                self.primus_world = self.primus_world or int(m.group(1))
                self.primus_evidence = True
                return True
        if "validation" in lower:
            m = _VALIDATION_RE.search(line)
            if m:
                try:
                    self.eval_losses[int(m.group(1))] = float(m.group(2))
                except ValueError:
                    return False
                return True
        return False

    def arg_int(self, key: str) -> int | None:
        try:
            return int(float(self.args[key]))
        except (KeyError, ValueError):
            return None
