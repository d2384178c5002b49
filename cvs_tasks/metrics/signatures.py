"""Known failure texts in training logs: what they are called, their class, whether they end a run.

Texts come from log_formats.md §3 (PyTorch, NCCL/RCCL, ROCr, Megatron rerun machinery, torchrun,
Primus). Unlike the reference scanner, matching is case-insensitive and OOM is covered.

Speed: a log can be gigabytes, so lines are never run through every pattern. Each signature names
*anchors* — lower-case substrings one of which must occur in any line it can match. A text block is
lower-cased once and searched for the anchors with ``str.find`` (C speed); only the few lines that
contain an anchor meet the real patterns, and only the patterns whose anchors they contain.
The first matching signature in catalogue order names the line (most specific first: an NCCL error
caused by ``out of memory`` is an OOM).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Iterable

CLASSES = ("oom", "nan", "gpu_fault", "segfault", "hip", "nccl", "rendezvous", "process")
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
MAX_TEXT = 400


@dataclass(frozen=True)
class Signature:
    name: str
    cls: str
    fatal: bool
    pattern: re.Pattern
    anchors: tuple[str, ...]
    hint: str = ""


@dataclass(frozen=True)
class ErrorHit:
    """One signature found on one line (1-based line number in the log file)."""

    name: str
    cls: str
    fatal: bool
    line: int
    text: str

    def to_dict(self) -> dict:
        d = asdict(self)
        d["class"] = d.pop("cls")
        return d


def _sig(name, cls, fatal, pattern, anchors, hint="") -> Signature:
    return Signature(name, cls, fatal, re.compile(pattern, re.IGNORECASE), tuple(anchors), hint)


SIGNATURES: tuple[Signature, ...] = (
    # --- out of memory (before NCCL/HIP: an NCCL or HIP error that says OOM is an OOM) ---
    _sig("gpu_oom", "oom", True,
         r"\b(?:HIP|CUDA) out of memory\b|OutOfMemoryError|\b(?:HIP|CUDA) error: out of memory"
         r"|hipErrorOutOfMemory|failure 2 'out of memory'",
         ["out of memory", "outofmemory"], "lower micro batch size or enable recompute"),
    _sig("host_oom", "oom", True,
         r"\bOut Of Memory\b|\boom_kill event|\boom-kill\b|^\W*Killed\W*$",
         ["out of memory", "oom", "killed"], "the host ran out of RAM (kernel OOM killer)"),
    # --- NaN / Inf (Megatron checks and rerun state machine) ---
    _sig("nan_in_grad_or_loss", "nan", True,
         r"found (?:NaN|Inf) in local (?:grad norm|forward loss)", ["found nan", "found inf"]),
    _sig("nan_unexpected_result", "nan", True, r"\bUnexpected result (?:nan|inf)\b",
         ["unexpected result"]),
    _sig("nan_rerun_exit", "nan", True,
         r"Saving a checkpoint and exiting now\. Please resume the job"
         r"|Exiting now\. The job can be resumed from a previous checkpoint", ["exiting now"]),
    _sig("nan_rerun_diagnostic", "nan", False,
         r"\b(?:First|Second) rerun: |Possible (?:transient|persistent) error!",
         ["rerun:", "possible transient", "possible persistent"]),
    _sig("loss_spike_warning", "nan", False, r"\bSpiky loss\b|found unexpected large grads",
         ["spiky", "large grads"]),
    # --- GPU faults (ROCr) ---
    _sig("gpu_memory_access_fault", "gpu_fault", True, r"Memory access fault by GPU", ["fault"],
         "check dmesg for the faulting node"),
    _sig("gpu_hw_exception", "gpu_fault", True, r"HW Exception by GPU", ["exception"]),
    _sig("gpu_hang", "gpu_fault", True, r"\bGPU Hang\b", ["gpu hang"]),
    _sig("gpu_reset_or_uncorrectable", "gpu_fault", True, r"\bGPU Reset\b|\bUncorrectable error\b",
         ["gpu reset", "uncorrectable"]),
    # --- segfaults ---
    _sig("segfault", "segfault", True,
         r"Segmentation fault|\bSIGSEGV\b|exitcode\s*:\s*-11\b|\bSignal 11\b",
         ["segmentation", "sigsegv", "exitcode", "signal 11"]),
    # --- HIP / CUDA runtime ---
    _sig("hip_illegal_memory_access", "hip", True,
         r"\b(?:HIP|CUDA) error: an illegal memory access|hipErrorIllegalAddress", ["error"]),
    _sig("hip_runtime_error", "hip", True, r"\b(?:HIP|CUDA) error: ", ["error"]),
    _sig("hip_async_report_notice", "hip", False,
         r"\b(?:HIP|CUDA) kernel errors might be asynchronously reported", ["asynchronously"]),
    # --- NCCL / RCCL ---
    _sig("nccl_watchdog_timeout", "nccl", True, r"Watchdog caught collective operation timeout",
         ["watchdog"], "a collective hung: check the network and every node's log"),
    _sig("nccl_watchdog_stuck", "nccl", True,
         r"watchdog got stuck for \d+ seconds|Heartbeat monitor timed out", ["watchdog", "heartbeat"]),
    _sig("nccl_watchdog_terminated", "nccl", True,
         r"Process group watchdog thread terminated|failure detected by watchdog", ["watchdog"]),
    _sig("nccl_operations_failed", "nccl", True, r"Some NCCL operations have failed or timed out",
         ["nccl operations"]),
    _sig("nccl_api_error", "nccl", True,
         r"\bnccl(?:System|Remote|Internal|UnhandledCuda|InvalidUsage|InvalidArgument)Error\b",
         ["error"]),
    _sig("nccl_dist_backend_error", "nccl", True, r"\bDistBackendError\b", ["error"]),
    _sig("nccl_error", "nccl", True, r"\bNCCL error\b|\bNCCL timeout\b", ["nccl error", "nccl timeout"]),
    _sig("rdma_queue_catastrophic", "nccl", True, r"local work queue catastrophic error",
         ["catastrophic"]),
    _sig("nccl_warning", "nccl", False, r"\bNCCL WARN\b", ["nccl warn"]),
    # --- rendezvous / store ---
    _sig("store_timeout", "rendezvous", True,
         r"\bDistStoreError\b|Timed out after \d+ seconds waiting for clients", ["error", "timed out"],
         "a node did not join: check MASTER_ADDR/MASTER_PORT and that every node started"),
    _sig("rendezvous_error", "rendezvous", True, r"\bRendezvous(?:Timeout|Closed)?Error\b", ["error"]),
    _sig("store_connect_failed", "rendezvous", True, r"client socket has failed to connect",
         ["failed to connect"]),
    _sig("connection_reset", "rendezvous", False, r"Connection reset by peer", ["connection reset"]),
    # --- process / launcher ---
    _sig("torchrun_child_failed", "process", True, r"\bChildFailedError\b", ["error"]),
    _sig("torch_elastic_error", "process", True, r"torch\.distributed\.elastic\.multiprocessing\.errors",
         ["error"]),
    _sig("worker_exit_code", "process", True, r"\bexitcode\s*:\s*-?[1-9]\d*", ["exitcode"]),
    _sig("worker_killed_by_signal", "process", True,
         r"\bSignal \d+ \(SIG[A-Z]+\) received by PID|\bSIGABRT\b|\bSIGKILL\b",
         ["signal", "sigabrt", "sigkill"]),
    _sig("process_aborted", "process", True, r"\bAborted \(core dumped\)", ["aborted"]),
    _sig("primus_training_failed", "process", True, r"Training execution failed", ["execution failed"]),
    _sig("torchrun_failed", "process", True,
         r"torchrun exited with code [1-9]\d*|torchrun crashed due to signal", ["torchrun"]),
    _sig("checkpoint_load_error", "process", True,
         r"could not load the checkpoint|Unable to load (?:optimizer|rng state) from checkpoint"
         r"|Invalid metadata file|is set but no checkpoint was found",
         ["could not load", "unable to load", "invalid metadata", "no checkpoint was found"]),
    _sig("python_traceback", "process", False, r"Traceback \(most recent call last\)", ["traceback"]),
)
BY_NAME = {s.name: s for s in SIGNATURES}
ANCHORS: tuple[str, ...] = tuple(sorted({a for s in SIGNATURES for a in s.anchors}))

# Signatures read from parsed iteration fields rather than text (see parser).
ITERATION_SIGNATURES: dict[str, tuple[str, bool]] = {
    "nan_iterations": ("nan", True),  # number of nan iterations > 0
    "grad_norm_not_finite": ("nan", True),  # grad norm: nan / inf
    "lm_loss_not_finite": ("nan", True),  # lm loss: nan / inf printed
    "lm_loss_missing": ("nan", True),  # NaN loss silently omitted by Megatron
    "skipped_iterations": ("nan", False),  # optimizer step skipped (fp16 overflow)
}


def clean(line: str) -> str:
    """A line as a person reads it: ANSI colours removed, trailing whitespace dropped."""
    if "\x1b" in line:
        line = ANSI_RE.sub("", line)
    return line.rstrip()


def match_line(line: str, lower: str | None = None) -> Signature | None:
    """The first signature matching one (ANSI-free) line, or None."""
    low = line.lower() if lower is None else lower
    for sig in SIGNATURES:
        if any(a in low for a in sig.anchors) and sig.pattern.search(line):
            return sig
    return None


def hit(sig: Signature, line_no: int, text: str) -> ErrorHit:
    return ErrorHit(sig.name, sig.cls, sig.fatal, line_no, text[:MAX_TEXT])


def anchored_line_starts(lower: str, anchors: Iterable[str]) -> list[int]:
    """Start offsets of the lines of ``lower`` that contain any anchor (sorted, unique)."""
    starts: set[int] = set()
    find, rfind = lower.find, lower.rfind
    end = len(lower)
    for anchor in anchors:
        pos = find(anchor)
        while pos != -1:
            starts.add(rfind("\n", 0, pos) + 1)
            line_end = find("\n", pos)
            if line_end == -1:
                break
            pos = find(anchor, line_end, end)
    return sorted(starts)


def scan_text(text: str, first_line: int = 1) -> list[ErrorHit]:
    """Every signature hit in a block of text; line numbers count from ``first_line``."""
    lower = text.lower()
    if len(lower) != len(text):  # rare non-ASCII case change: fall back to line by line
        return scan_lines(text.split("\n"), first_line)
    hits: list[ErrorHit] = []
    line_no, prev = first_line, 0
    for start in anchored_line_starts(lower, ANCHORS):
        line_no += text.count("\n", prev, start)
        prev = start
        end = text.find("\n", start)
        line = clean(text[start: end if end != -1 else len(text)])
        sig = match_line(line)
        if sig is not None:
            hits.append(hit(sig, line_no, line))
    return hits


def scan_lines(lines: Iterable[str], first_line: int = 1) -> list[ErrorHit]:
    """Every signature hit in a sequence of lines (no trailing newlines needed)."""
    hits: list[ErrorHit] = []
    for offset, raw in enumerate(lines):
        line = clean(raw)
        lower = line.lower()
        if not any(a in lower for a in ANCHORS):
            continue
        sig = match_line(line, lower)
        if sig is not None:
            hits.append(hit(sig, first_line + offset, line))
    return hits
