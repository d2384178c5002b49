"""Hostile variants of the round-3 log lines (issue #27): launcher ``[ERROR]`` lines, Slurm errors,
a shell's job report, a full disk, tracebacks after warnings, Primus running averages.

Very long lines finish in bounded time (no regex backtracks over a repeated fragment), escape
sequences neither hide a failure nor make one up, lines that only look like a signature are not
one, and whatever the text, scanning never raises and a piece-wise feed equals a whole one.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cvs_tasks.metrics import LogParser, scan_lines, scan_text
from cvs_tasks.metrics.signatures import MAX_TEXT

MIB = 1 << 20


def parse(*pieces: str) -> LogParser:
    parser = LogParser()
    for piece in pieces:
        parser.feed(piece)
    parser.finish()
    return parser


def fatal_names(text: str) -> list[str]:
    return [h.name for h in parse(text).fatal_errors]


# --- very long lines: each repeats a fragment that a careless pattern would backtrack over ----------
LONG = {
    "slurm noise after many errors": "slurmstepd: error: " * (MIB // 19) + "_is_a_lwp: ",
    "srun errors then a tty complaint": "srun: error: " * (MIB // 13) + "ioctl(TIOCGWINSZ)",
    "chdir noise without its end": "slurmstepd: error: couldn't chdir to " * (MIB // 37),
    "host-like prefixes then no level": "gpu-node-07: " * (MIB // 13) + "[ERRO",
    "brackets then no level": "[x]" * (MIB // 3) + "[ERROR",
    "worker tags": "[rank-1/8]" * (MIB // 10) + "[ERROR] x",
    "shell reports without a signal": "line 1: 1 " * (MIB // 10),
    "warning records without a message": "[rank0]: WARNING:x:" * (MIB // 19),
    "dotted names without an exception": "a." * (MIB // 2) + "Erro",
    "disk words without a device": "No space left " * (MIB // 14),
}


@pytest.mark.parametrize("name", sorted(LONG))
def test_a_one_mib_line_is_scanned_in_bounded_time(name):
    line = LONG[name]
    started = time.perf_counter()
    parser = parse("before\n" + line + "\nafter\n")
    took = time.perf_counter() - started
    assert took < 15.0, f"{name}: {took:.1f} s"
    assert all(len(h.text) <= MAX_TEXT for h in parser.errors)
    assert parser.lines == 3


def test_a_line_over_the_parser_limit_is_skipped_not_scanned():
    parser = parse("[ERROR] " + "x" * (4 * MIB) + "\n/job/run.sh: line 9: 77 Killed   python x.py\n")
    assert parser.lines_skipped == 1 and [h.name for h in parser.fatal_errors] == ["shell_job_killed"]


# --- escape sequences ------------------------------------------------------------------------------
@pytest.mark.parametrize("line, name", [
    ("\x1b[1;31m[primus-slurm-entry][ERROR]\x1b[0m Script not found: /x/run.sh", "launcher_error"),
    ("\x1b[1m/job/run.sh: line 131: 1948759 \x1b[31mKilled\x1b[0m\x1b[0m   deepspeed --hostfile h", "shell_job_killed"),
    ("\x1b[33mslurmstepd\x1b[0m: error: execve(): run.sh: No such file or directory", "slurm_step_error"),
    ("[\x1b[31mERROR\x1b[0m] hostfile /job/hostfile is empty", "launcher_error"),
    ("/job/run.sh: line 131: 1948759 Kil\x1b[0mled   deepspeed --hostfile h", "shell_job_killed"),
    ("OSError: [Errno 28] No space \x1b[2Kleft on device: '/ckpt'", "disk_full"),
    ("progress 40%|████      |\r/job/run.sh: line 7: 912 Terminated   torchrun x.py", "shell_job_terminated"),
])
def test_colour_and_cursor_codes_do_not_hide_a_failure(line, name):
    assert fatal_names(line + "\n") == [name]


@pytest.mark.parametrize("line", [
    "INFO all good\r[ERROR] drawn over the line start by a carriage return",
    "\x1b[2J\x1b[H[INFO] screen cleared, then a normal line",
    "\x1b[31m\x1b[0m",
    "[\x1b[31mERROR\x1b[0m-free] INFO line about the error budget",
    "\x1b]0;[ERROR] a window title, not a log line\x07 [INFO] started",
])
def test_escape_sequences_do_not_make_up_a_failure(line):
    assert fatal_names(line + "\n") == []


# --- lines that look like a signature but are not ---------------------------------------------------
@pytest.mark.parametrize("line", [
    "the launcher prints [ERROR] lines when a script is missing",
    "[ERRORS] 0",
    "[ERROR]",
    "[20261130 04:12:55][rank-3/8][ERROR]    [---trainer.py:9] : retrying the save",
    "/job/run.sh: line 131: 1948759 Killedx deepspeed",
    "/job/run.sh: line 131: Killed",
    "status='Killed' exit=0",
    "[1]+  Done                    python train.py",
    "zsh: done       python train.py",
    "PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
    "tokens per GPU: no space left for padding (ok)",
    "slurmstepd: info: done",
    "srun: job 4242 queued and waiting for resources",
    "gpu-node-03:1:2 [3] NCCL WARN NET/IB : Got async event : port error",
    "Errno 28 is ENOSPC in errno.h",
    "EDQUOT and ENOSPC are retried by the writer",
])
def test_look_alikes_are_not_fatal(line):
    assert [h for h in scan_lines([line]) if h.fatal] == []


def test_many_unrelated_warnings_never_make_a_crash_handled():
    noise = "".join(f"[rank{r}]: WARNING:megatron.core.utils:flush failed, continuing\n" for r in range(8) if r != 5)
    text = noise + "[rank5]: Traceback (most recent call last):\n[rank5]: ValueError: bad shard\n"
    parser = parse(text)
    assert parser.root_cause.name == "python_exception" and "bad shard" in parser.root_cause.text


def test_a_warning_that_announces_a_traceback_hundreds_of_lines_away_does_not_cover_it():
    text = ("WARNING:root:retrying after an error:\n" + "plain progress line\n" * 300
            + "Traceback (most recent call last):\nRuntimeError: boom\n")
    assert fatal_names(text) == ["python_exception"]


def test_primus_averages_with_absurd_stamps_and_values_do_not_crash():
    lines = []
    for step, (stamp, ms) in enumerate([("9999-12-31 23:59:59.999999", "1e308"), ("0001-01-01 00:00:00", "inf"),
                                        ("2026-02-30 25:61:61", "nan"), ("2026-11-30 04:00:00.5", "-5"),
                                        ("2026-11-30 04:00:01", "1e-300")], start=1):
        lines.append(f" [{stamp}] iteration {step:8d}/      10 | consumed samples: 1 | elapsed time per iteration "
                     f"(ms): {ms} | global batch size:    16 | lm loss: 9.0E+00 | loss scale: 1.0 | number of "
                     "skipped iterations:   0 | number of nan iterations:   0 |\n")
    parser = parse("".join(lines))
    parser.summary()
    assert parser.stats.describe()["averaged_steps"] in ([], [5])


# --- any text: scanning never raises and does not depend on how the text was cut --------------------
FRAGMENTS = st.sampled_from([
    "[ERROR] ", "[primus-slurm-entry]", "[rank3]: ", "0: ", "[default0]: ", "slurmstepd: error: ", "srun: error: ",
    "line 131: ", "1948759 ", "Killed ", "Terminated ", "Bus error ", "Aborted ", "(core dumped) ",
    "No space left on device", "[Errno 28] ", "WARNING:x.y:", "failed, continuing", "Traceback (most recent call "
    "last):", "ValueError: ", "NCCL WARN ", "\x1b[31m", "\x1b[0m", "\r", "\n", " ", ":", "[", "]", "(", ")",
    "_is_a_lwp: ", "ioctl(TIOCGWINSZ)", "zsh: killed ", "[1]+ ", "\ufffd", "é",
])


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(FRAGMENTS, max_size=40), cut=st.integers(0, 10_000))
def test_scanning_any_text_never_raises_and_is_cut_independent(parts, cut):
    text = "".join(parts)
    hits = scan_text(text)
    assert hits == scan_lines(text.split("\n"))
    assert all(isinstance(h.fatal, bool) and 1 <= h.line <= text.count("\n") + 1 for h in hits)
    cut = min(cut, len(text))
    whole, pieces = parse(text), parse(text[:cut], text[cut:])
    assert whole.errors == pieces.errors and whole.root_cause == pieces.root_cause
