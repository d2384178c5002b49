"""Known failure texts in training logs: name, class, whether they end a run, and what to do.

Texts come from docs/log_formats.md#error-signatures (PyTorch, NCCL/RCCL, ROCr, Megatron rerun machinery, torchrun,
Primus, DeepSpeed) and from what runs around them: Slurm (``slurmstepd``, ``srun``), a launcher's
own ``[ERROR]`` line, the shell's report of a job that died of a signal, tools saying a disk is
full. The first matching signature in catalogue order names a line, so the specific come before
the general (an NCCL error that says ``out of memory`` is an OOM; ``SignalException: ... got
signal: 15`` is a signal death, not just any exception). Matching is case-insensitive except for
the exception line (``[rank4]: FileNotFoundError: ...``) and the launcher's ``[ERROR]`` tag.

Each signature names *anchors*: lower-case substrings one of which a line must contain to be
tried at all, so the bulk of a log never meets a regex.

Root cause (``CAUSE_RANK``): a node's own failure (OOM, a full disk, NaN, GPU fault, a Python
exception) comes first, then what failed around the workers (scheduler, a launcher's own
``[ERROR]``, a signal from outside), then collective errors (NCCL, rendezvous,
usually what peers print when one rank dies), then launcher exits (always an echo). Within a
rank, the earliest line wins.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Iterable

CLASSES = ("oom", "disk", "nan", "gpu_fault", "segfault", "hip", "exception", "scheduler", "launcher",
           "signal", "nccl", "rendezvous", "process")
CAUSE_RANK = {"oom": 0, "disk": 0, "nan": 0, "gpu_fault": 0, "segfault": 0, "hip": 0, "exception": 0,
              "scheduler": 1, "launcher": 1, "signal": 1, "nccl": 2, "rendezvous": 2, "process": 3}
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


# A shell's report of a job that died of a signal: bash ``<script>: line 131: 1948759 Killed   <command>``
# (also without the script, ``bash: line 1: ...``, a padded pid), job control ``[1]+  Killed   <command>``,
# zsh ``zsh: killed     <command>``; ``(core dumped)`` may follow the signal's name.
_SHELL_JOB = r"(?:(?:^|[\s:])line \d+: +\d+ +|(?:^|[\s:])\[\d+\][+-]? +|\bzsh: (?:\d+ )?)"
# What launchers put before a line: srun ``3:``, torchrun ``[rank3]:`` / ``[default3]:``, pdsh ``host: ``, an ISO
# time stamp (CI, kubectl), a process tag ``(PrimusMaster pid=1)``.
_LAUNCH_PREFIX = (r"^(?:\s*(?:\d+:|\[(?:rank|default)\d+\]:|[A-Za-z][\w.-]*:(?= )|\([^()\n]*\)"
                  r"|\d{4}-\d\d-\d\dT[\d:.,]+Z?(?= )))*\s*")
# Slurm errors seen on healthy runs (no tty for srun, a step whose process list raced, a missing cwd):
# listed before the fatal Slurm errors as a signature of their own, so they are shown but end nothing.
_SLURM_NOISE = (r"\b(?:slurmstepd|srun)(?:-[\w.-]+)?: error: (?:ioctl\(TIOCGWINSZ\)|_is_a_lwp: "
                r"|couldn't chdir to [^:\n]*: [^:\n]*: going to /tmp instead)")
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
    # --- a full disk or quota (Python ENOSPC/EDQUOT, shell tools, torch.save, NCCL's /dev/shm segment) ---
    _sig("disk_full", "disk", True,
         r"No space left on device|\[Errno 28\]|\(os error 28\)|Disk quota exceeded|\[Errno 122\]"
         r"|PytorchStreamWriter failed writing file|failed to extend /dev/shm",
         ["no space left", "errno 28", "os error 28", "quota exceeded", "errno 122", "failed writing file",
          "failed to extend"],
         "a disk or quota is full: free space where the line points (checkpoint or data cache directory, /tmp; "
         "for /dev/shm raise the container's --shm-size) and rerun"),
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
         r"Segmentation fault|\bSIGSEGV\b|exitcode\s*:\s*-11\b|\bSignal 11\b|\bSIGBUS\b"
         r"|" + _SHELL_JOB + r"Bus error\b|" + _LAUNCH_PREFIX + r"Bus error(?: \(core dumped\))?\s*$",
         ["segmentation", "sigsegv", "exitcode", "signal 11", "sigbus", "bus error"],
         "a native library crashed: check image versions"),
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
    _sig("slurm_noise", "scheduler", False, _SLURM_NOISE, ["tiocgwinsz", "_is_a_lwp", "going to /tmp"]),
    _sig("slurm_step_error", "scheduler", True, r"\bslurmstepd(?:-[\w.-]+)?: error: ",
         ["slurmstepd"], "Slurm could not start or keep the step: its message says what (a missing script or "
         "directory, a limit, a node problem)"),
    _sig("srun_error", "scheduler", True, r"\bsrun: error: ", ["srun: error"],
         "srun failed to place or run the step: its message says what (allocation, node, missing program)"),
    # --- signal deaths ---
    _sig("signal_death", "signal", True,
         r"\bReceived (?:\d+|Signals\.SIG\w+) death signal\b|\bSignalException\b.*\bgot signal\b"
         r"|\bKeyboardInterrupt\b|^\W*Terminated\W*$",
         ["death signal", "signalexception", "keyboardinterrupt", "terminated"],
         "the job was sent a signal from outside (scheduler, OOM killer, a user): see who sent it"),
    _sig("shell_job_killed", "signal", True, _SHELL_JOB + r"Killed\b", ["killed"],
         "SIGKILL from outside the process: usually the kernel OOM killer (check dmesg and the job's peak "
         "memory on the node), else a kill -9 by the scheduler or a user"),
    _sig("shell_job_terminated", "signal", True, _SHELL_JOB + r"Terminated\b", ["terminated"],
         "SIGTERM from outside the process: the scheduler (time limit, scancel), a user, or a launcher "
         "stopping the job after another rank failed"),
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
    _sig("process_aborted", "process", True,
         r"\bAborted \(core dumped\)|" + _SHELL_JOB + r"Abort(?:ed)?\b|^\W*Aborted\W*$", ["abort"], _ECHO_HINT),
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
    # --- Megatron refusing its arguments at start (ValueError / AssertionError text; the exception line wins over
    # the generic python_exception below): a value that reached it as a string, FSDP2 with the distributed optimizer ---
    _sig("megatron_recompute_granularity", "exception", True,
         r"recompute_granu\w*: \S.* must be \"full\" ?or \"selective\"", ["must be \"full"],
         "recompute_granularity reached Megatron as text it cannot read (a Primus override such as 'null' stays a "
         "string): pass None, 'full' or 'selective' (docs/primus_overrides.md)"),
    _sig("megatron_fsdp2_distributed_optimizer", "exception", True,
         r"--use-torch-fsdp2 is not supported with MCore's distributed optimizer", ["use-torch-fsdp2"],
         "FSDP2 is on together with the distributed optimizer: turn one off (a Primus override 'false' is the "
         "string 'false', which is true: docs/primus_overrides.md)"),
    # --- a launcher's own error line: "[primus-slurm-entry][ERROR] Script not found: ...", "[ERROR] ...",
    # "[<time>] [NODE-0(host)] [ERROR] ..." (a worker's loguru record carries a [rank-N/M] tag: not a launcher) ---
    _sig("launcher_error", "launcher", True,
         _LAUNCH_PREFIX + r"(?:\[(?!rank-\d)[^\]\n]*\]\s*)*\[(?:ERROR|FATAL|CRITICAL)\]:?\s*\S",
         ["[error]", "[fatal]", "[critical]"],
         "the launcher failed before or around training: its message names what is missing or wrong "
         "(script path, hostfile, environment, container)", flags=0),
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
# A logging *record* at warning level, the kind that can carry a traceback (``logger.warning(..., exc_info=True)``):
# Python logging ``WARNING:name:msg``, loguru or a launcher ``[WARNING]``, formatters ``- WARNING -`` / ``| WARNING |``.
_WARNING_RECORD = re.compile(
    r"(?:^|[\s\]:])(?:WARNING:[\w.]*:|\[WARN(?:ING)?\s*\]|- WARN(?:ING)? -|\| WARN(?:ING)? \|)")
# ... but not a ``warnings.warn`` category line, a C library's warning (NCCL, glog): they never print a traceback.
_NOT_A_RECORD = re.compile(r"\bNCCL WARN\b|\b[A-Z]\w*Warning: |(?:^|[\]:\s])W\d{4} \d\d:|\[W ")
# The record's message says something failed and is being handled (the traceback shows what).
_ANNOUNCES = re.compile(r"traceback|exception|error|fail|retr(?:y|ie)|ignor|continu|skipp|fall(?:ing)? ?back|:\s*$",
                        re.IGNORECASE)
# Who printed a line: the launcher's rank tags (torchrun ``[rank3]:``, ``[default3]:``, srun ``3:``, Primus
# ``[rank-3/8]``); lines of one traceback share them. (A ``host: `` prefix is not read: it looks like the
# ``FileNotFoundError: `` that ends a traceback.)
_ORIGIN = re.compile(r"\[(?:rank-?\d+(?:/\d+)?|default\d+)\]|^\s*\d+:(?= )")


def origin(line: str) -> tuple[str, ...]:
    """The launcher's rank tags on a line (empty without any)."""
    return tuple(_ORIGIN.findall(line))


def announces_traceback(line: str) -> bool:
    """A warning-level logging record saying something failed and is handled: the traceback right after it
    (same origin) is that record's ``exc_info``, not a crash. An unrelated warning (another rank, a
    ``UserWarning``, ``NCCL WARN``, a record that reports no failure) does not qualify."""
    m = _WARNING_RECORD.search(line)
    return bool(m) and not _NOT_A_RECORD.search(line) and bool(_ANNOUNCES.search(line, m.end()))


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

    A traceback is handled (its exception line not fatal) when it is logged at warning level
    itself, or when the line right before it is a warning record of the same origin that
    announces it (``announces_traceback``); the exception lines of that origin within
    ``TRACEBACK_LINES`` belong to it. An exception line that carries a warning level itself is
    not fatal either. Anything else, a traceback after an unrelated warning included, is fatal.
    """

    def __init__(self) -> None:
        self._announce: tuple[int, tuple[str, ...]] = (-2, ())  # line and origin of the last announcing record
        self._handled: tuple[int, tuple[str, ...]] = (-10**9, ())  # where a handled traceback began, its origin

    def scan(self, line: str, lower: str, line_no: int) -> ErrorHit | None:
        sig = match_line(line, lower)
        warning = "warn" in lower and bool(_WARNING_LEVEL.search(line))
        if sig is not None and sig.name == "python_traceback":
            here = origin(line)
            announced = self._announce == (line_no - 1, here)
            self._handled = (line_no, here) if warning or announced else (-10**9, ())
        if warning and announces_traceback(line):
            self._announce = (line_no, origin(line))
        if sig is None:
            return None
        if sig.name == "python_exception":
            began, where = self._handled
            handled = line_no - began <= TRACEBACK_LINES and origin(line) == where
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
