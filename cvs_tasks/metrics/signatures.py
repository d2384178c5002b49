"""Known failure texts in training logs: name, class, whether they end a run, and what to do.

Texts come from log_formats.md §3 (PyTorch, NCCL/RCCL, ROCr, Megatron rerun machinery, torchrun,
Primus, DeepSpeed) and from the schedulers and launchers around them (Slurm, srun). The first
matching signature in catalogue order names a line, so the specific come before the general
(an NCCL error that says ``out of memory`` is an OOM; ``SignalException: ... got signal: 15`` is
a signal death, not just any exception). Matching is case-insensitive except for the exception
line, whose shape (``[rank4]: FileNotFoundError: ...``) is case-sensitive.

Each signature names *anchors*: lower-case substrings one of which a line must contain to be
tried at all, so the bulk of a log never meets a regex.

Root cause (``CAUSE_RANK``): a node's own failure (OOM, NaN, GPU fault, a Python exception)
comes first, then an outside kill (scheduler, signal), then collective errors (NCCL, rendezvous,
usually what peers print when one rank dies), then launcher exits (always an echo). Within a
rank, the earliest line wins.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Iterable

CLASSES = ("oom", "nan", "gpu_fault", "segfault", "hip", "exception", "scheduler", "signal",
           "nccl", "rendezvous", "process")
CAUSE_RANK = {"oom": 0, "nan": 0, "gpu_fault": 0, "segfault": 0, "hip": 0, "exception": 0,
              "scheduler": 1, "signal": 1, "nccl": 2, "rendezvous": 2, "process": 3}
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
MAX_TEXT = 400
TRACEBACK_LINES = 200  # an exception line this close after a traceback's first line ends it


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
    hint: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        d["class"] = d.pop("cls")
        return d


def _sig(name, cls, fatal, pattern, anchors, hint="", flags=re.IGNORECASE) -> Signature:
    return Signature(name, cls, fatal, re.compile(pattern, flags), tuple(anchors), hint)


_NCCL_HINT = "a collective failed: look for the first error on any node (often a rank that died), then the network"
_ECHO_HINT = "the launcher reports a worker's failure: the cause is the first fatal line before it"
SIGNATURES: tuple[Signature, ...] = (
    # --- out of memory (before NCCL/HIP: an NCCL or HIP error that says OOM is an OOM) ---
    _sig("gpu_oom", "oom", True,
         r"\b(?:HIP|CUDA) out of memory\b|OutOfMemoryError|\b(?:HIP|CUDA) error: out of memory"
         r"|hipErrorOutOfMemory|failure 2 'out of memory'",
         ["out of memory", "outofmemory"], "lower the micro batch size or enable activation recompute"),
    _sig("host_oom", "oom", True,
         r"\bOut Of Memory\b|\boom[_-]kill|^\W*Killed\W*$|\btask \d+: Out Of Memory",
         ["out of memory", "oom", "killed"], "the host ran out of RAM (kernel OOM killer): fewer data workers"),
    # --- NaN / Inf (Megatron checks and rerun state machine) ---
    _sig("nan_in_grad_or_loss", "nan", True,
         r"found (?:NaN|Inf) in local (?:grad norm|forward loss)", ["found nan", "found inf"],
         "training diverged: lower the learning rate or check the data; resume from a checkpoint"),
    _sig("nan_unexpected_result", "nan", True, r"\bUnexpected result (?:nan|inf)\b",
         ["unexpected result"], "training diverged: lower the learning rate or check the data"),
    _sig("nan_rerun_exit", "nan", True,
         r"Saving a checkpoint and exiting now\. Please resume the job"
         r"|Exiting now\. The job can be resumed from a previous checkpoint", ["exiting now"],
         "Megatron's rerun check stopped the job: resume from the checkpoint"),
    _sig("nan_rerun_diagnostic", "nan", False,
         r"\b(?:First|Second) rerun: |Possible (?:transient|persistent) error!",
         ["rerun:", "possible transient", "possible persistent"]),
    _sig("loss_spike_warning", "nan", False, r"\bSpiky loss\b|found unexpected large grads",
         ["spiky", "large grads"]),
    # --- GPU faults (ROCr) ---
    _sig("gpu_memory_access_fault", "gpu_fault", True, r"Memory access fault by GPU", ["fault"],
         "check dmesg on the node; a repeated fault on one GPU means bad hardware"),
    _sig("gpu_hw_exception", "gpu_fault", True, r"HW Exception by GPU", ["exception"],
         "check dmesg and the GPU's RAS counters on the node"),
    _sig("gpu_hang", "gpu_fault", True, r"\bGPU Hang\b", ["gpu hang"], "check dmesg; reset the GPU"),
    _sig("gpu_reset_or_uncorrectable", "gpu_fault", True, r"\bGPU Reset\b|\bUncorrectable error\b",
         ["gpu reset", "uncorrectable"], "check dmesg and the GPU's RAS counters on the node"),
    # --- segfaults ---
    _sig("segfault", "segfault", True,
         r"Segmentation fault|\bSIGSEGV\b|exitcode\s*:\s*-11\b|\bSignal 11\b",
         ["segmentation", "sigsegv", "exitcode", "signal 11"], "a native library crashed: check image versions"),
    # --- HIP / CUDA runtime ---
    _sig("hip_illegal_memory_access", "hip", True,
         r"\b(?:HIP|CUDA) error: an illegal memory access|hipErrorIllegalAddress", ["error"],
         "rerun with AMD_SERIALIZE_KERNEL=3 to find the kernel"),
    _sig("hip_runtime_error", "hip", True, r"\b(?:HIP|CUDA) error: ", ["error"],
         "a GPU runtime call failed: check the image matches the driver"),
    _sig("hip_async_report_notice", "hip", False,
         r"\b(?:HIP|CUDA) kernel errors might be asynchronously reported", ["asynchronously"]),
    # --- scheduler (Slurm; PBS and LSF time limits) ---
    _sig("scheduler_time_limit", "scheduler", True,
         r"\bCANCELLED AT \S+ DUE TO TIME LIMIT\b|\bTIME LIMIT\b.*\*\*\*|PBS: job killed: walltime \d+ exceeded"
         r"|\bTERM_RUNLIMIT\b", ["time limit", "walltime", "term_runlimit"],
         "the scheduler's time limit ended the job: ask for more time or lower training_iterations"),
    _sig("scheduler_preempted", "scheduler", True, r"\bDUE TO PREEMPTION\b|\bJob \S+ preempted\b|\bTERM_PREEMPT\b",
         ["preempt"], "a higher-priority job preempted this one: resubmit (resume from the last checkpoint)"),
    _sig("scheduler_node_failure", "scheduler", True, r"\bDUE TO NODE FAILURE\b", ["node failure"],
         "Slurm lost a node: drain it and resubmit"),
    _sig("scheduler_cancelled", "scheduler", True, r"\*\*\* (?:STEP|JOB) \S+ (?:ON \S+ )?CANCELLED AT\b",
         ["cancelled at"], "the job was cancelled (scancel by a user or an admin)"),
    _sig("srun_step_aborted", "scheduler", True,
         r"\bsrun: Job step aborted\b|\bsrun: forcing job termination\b"
         r"|\bsrun: error: \S+: tasks? [\d,-]+: (?:Exited with exit code [1-9]|Killed|Terminated)",
         ["srun:"], "a task of the Slurm step failed or was cancelled: the cause is the first error above"),
    # --- signal deaths ---
    _sig("signal_death", "signal", True,
         r"\bReceived (?:\d+|Signals\.SIG\w+) death signal\b|\bSignalException\b.*\bgot signal\b"
         r"|\bKeyboardInterrupt\b|^\W*Terminated\W*$",
         ["death signal", "signalexception", "keyboardinterrupt", "terminated"],
         "the job was sent a signal from outside (scheduler, OOM killer, a user): see who sent it"),
    # --- NCCL / RCCL ---
    _sig("nccl_watchdog_timeout", "nccl", True, r"Watchdog caught collective operation timeout",
         ["watchdog"], _NCCL_HINT),
    _sig("nccl_watchdog_stuck", "nccl", True,
         r"watchdog got stuck for \d+ seconds|Heartbeat monitor timed out", ["watchdog", "heartbeat"],
         _NCCL_HINT),
    _sig("nccl_watchdog_terminated", "nccl", True,
         r"Process group watchdog thread terminated|failure detected by watchdog", ["watchdog"], _NCCL_HINT),
    _sig("nccl_operations_failed", "nccl", True, r"Some NCCL operations have failed or timed out",
         ["nccl operations"], _NCCL_HINT),
    _sig("nccl_api_error", "nccl", True,
         r"\bnccl(?:System|Remote|Internal|UnhandledCuda|InvalidUsage|InvalidArgument)Error\b",
         ["error"], _NCCL_HINT),
    _sig("nccl_dist_backend_error", "nccl", True, r"\bDistBackendError\b", ["error"], _NCCL_HINT),
    _sig("nccl_error", "nccl", True, r"\bNCCL error\b|\bNCCL timeout\b", ["nccl error", "nccl timeout"],
         _NCCL_HINT),
    _sig("rdma_queue_catastrophic", "nccl", True, r"local work queue catastrophic error",
         ["catastrophic"], "the RDMA NIC failed: check the NIC and its link on the node"),
    _sig("nccl_warning", "nccl", False, r"\bNCCL WARN\b", ["nccl warn"]),
    # --- rendezvous / store ---
    _sig("store_timeout", "rendezvous", True,
         r"\bDistStoreError\b|Timed out after \d+ seconds waiting for clients", ["error", "timed out"],
         "a node did not join: check MASTER_ADDR/MASTER_PORT and that every node started"),
    _sig("rendezvous_error", "rendezvous", True, r"\bRendezvous(?:Timeout|Closed)?Error\b", ["error"],
         "a node did not join: check MASTER_ADDR/MASTER_PORT and that every node started"),
    _sig("store_connect_failed", "rendezvous", True, r"client socket has failed to connect",
         ["failed to connect"], "the master is unreachable: check MASTER_ADDR/MASTER_PORT and the firewall"),
    _sig("connection_reset", "rendezvous", False, r"Connection reset by peer", ["connection reset"]),
    # --- process / launcher (echoes of a worker's failure) ---
    _sig("torchrun_child_failed", "process", True, r"\bChildFailedError\b", ["error"], _ECHO_HINT),
    _sig("torch_elastic_error", "process", True, r"torch\.distributed\.elastic\.multiprocessing\.errors",
         ["error"], _ECHO_HINT),
    _sig("worker_exit_code", "process", True, r"\bexitcode\s*:\s*-?[1-9]\d*", ["exitcode"], _ECHO_HINT),
    _sig("worker_killed_by_signal", "process", True,
         r"\bSignal \d+ \(SIG[A-Z]+\) received by PID|\bSIGABRT\b|\bSIGKILL\b",
         ["signal", "sigabrt", "sigkill"], _ECHO_HINT),
    _sig("process_aborted", "process", True, r"\bAborted \(core dumped\)", ["aborted"], _ECHO_HINT),
    _sig("primus_training_failed", "process", True, r"Training execution failed", ["execution failed"],
         _ECHO_HINT),
    _sig("torchrun_failed", "process", True, r"torchrun exited with code [1-9]\d*|torchrun crashed due to signal",
         ["torchrun"], _ECHO_HINT),
    _sig("launcher_exit", "process", True,
         r"\bprimus[\w-]* (?:launcher )?exited with (?:exit )?code [1-9]\d*"
         r"|\bexits with return code = -?[1-9]\d*|returned non-zero exit status [1-9]\d*"
         r"|\bpdsh@\S+ \S+: ssh exited with exit code [1-9]|\bssh exited with exit code [1-9]"
         r"|\bmpirun noticed that process rank \d+ .*\bexited on signal \d+|returned\s+a non-zero exit code",
         ["exited with", "return code", "non-zero exit", "mpirun noticed"], _ECHO_HINT),
    _sig("checkpoint_load_error", "process", True,
         r"could not load the checkpoint|Unable to load (?:optimizer|rng state) from checkpoint"
         r"|Invalid metadata file|is set but no checkpoint was found",
         ["could not load", "unable to load", "invalid metadata", "no checkpoint was found"],
         "check --load and the checkpoint directory (or start without loading)"),
    # --- the final line of a Python traceback: "[rank4]: FileNotFoundError: ..." ---
    _sig("python_exception", "exception", True,
         r"^(?:\s*(?:\[(?:rank|default)\d+\]:|\d+:|[\w.-]+:(?= )|(?:\[[^\]\n]*\]\s*)+:(?= )))*\s*"
         r"(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)(?::\s|:?$)",
         ["error", "exception"], "a rank raised an exception: its message says what to fix", flags=0),
    _sig("python_traceback", "exception", False, r"Traceback \(most recent call last\)", ["traceback"]),
)
ANCHORS: tuple[str, ...] = tuple(sorted({a for s in SIGNATURES for a in s.anchors} | {"warn"}))

# Signatures read from parsed iteration fields rather than text (see parser).
ITERATION_SIGNATURES: dict[str, tuple[str, bool]] = {
    "nan_iterations": ("nan", True),  # number of nan iterations > 0
    "grad_norm_not_finite": ("nan", True),  # grad norm: nan / inf
    "lm_loss_not_finite": ("nan", True),  # lm loss: nan / inf printed
    "lm_loss_missing": ("nan", True),  # NaN loss silently omitted by Megatron
    "skipped_iterations": ("nan", False),  # optimizer step skipped (fp16 overflow)
}
# A line logged at warning level (Python logging, loguru, glog "W1218 ...").
_WARNING_LEVEL = re.compile(r"\bWARN(?:ING)?\b|(?:^|[\]:\s])W\d{4} \d\d:")


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


def hit(sig: Signature, line_no: int, text: str, fatal: bool | None = None) -> ErrorHit:
    return ErrorHit(sig.name, sig.cls, sig.fatal if fatal is None else fatal, line_no,
                    text[:MAX_TEXT], sig.hint)


def root_cause(hits: Iterable[ErrorHit]) -> ErrorHit | None:
    """The fatal hit that explains a failure: the best cause class, then the earliest line."""
    fatal = [h for h in hits if h.fatal]
    return min(fatal, key=lambda h: (CAUSE_RANK.get(h.cls, 3), h.line)) if fatal else None


class Scanner:
    """Finds signatures line by line, with the little context tracebacks need.

    A traceback printed right after a warning-level line (a surviving process logging a handled
    error) and exception lines that carry a warning level themselves are not fatal.
    """

    def __init__(self) -> None:
        self._warning_line = -2  # line number of the last warning-level line
        self._warning_traceback = -10**9  # where the last traceback opened at warning level began

    def scan(self, line: str, lower: str, line_no: int) -> ErrorHit | None:
        sig = match_line(line, lower)
        warning = "warn" in lower and bool(_WARNING_LEVEL.search(line))
        if sig is not None and sig.name == "python_traceback":
            at_warning = warning or self._warning_line == line_no - 1
            self._warning_traceback = line_no if at_warning else -10**9
        if warning:
            self._warning_line = line_no
        if sig is None:
            return None
        if sig.name == "python_exception":
            handled = line_no - self._warning_traceback <= TRACEBACK_LINES
            return hit(sig, line_no, line, fatal=not (warning or handled))
        return hit(sig, line_no, line)


def scan_lines(lines: Iterable[str], first_line: int = 1) -> list[ErrorHit]:
    """Every signature hit in a sequence of lines (no trailing newlines needed)."""
    scanner, hits = Scanner(), []
    for offset, raw in enumerate(lines):
        line = clean(raw)
        lower = line.lower()
        if any(a in lower for a in ANCHORS):
            found = scanner.scan(line, lower, first_line + offset)
            if found is not None:
                hits.append(found)
    return hits


def scan_text(text: str, first_line: int = 1) -> list[ErrorHit]:
    """Every signature hit in a block of text; line numbers count from ``first_line``."""
    return scan_lines(text.split("\n"), first_line)
