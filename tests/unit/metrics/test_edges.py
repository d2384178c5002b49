"""Warm-up edge cases and bad input: short runs, resumed logs, restarts inside one log, absurd
numbers, endless lines, files that are not files, and output into a closed pipe."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from invoke import Context
from invoke.exceptions import Exit

from cvs_tasks.metrics import LogParser, parse_file
from cvs_tasks.tasks.logs import parse as parse_task
from cvs_tasks.tasks.logs import scan as scan_task

REPO = Path(__file__).resolve().parents[3]
LINE = (" [2026-11-30 04:00:00] iteration {s:8d}/{t:8d} | consumed samples: {c:12d} | elapsed time per "
        "iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): 480.0 | learning rate: 1.5E-05 | "
        "global batch size:   128 | lm loss: 9.5E+00 | loss scale: 1.0 | grad norm: 1.500 | number of "
        "skipped iterations:   0 | number of nan iterations:   0 |\n")


def lines(steps, total, ms=lambda s: 1000.0 + s) -> str:
    return "".join(LINE.format(s=s, t=total, c=s * 128, ms=ms(s)) for s in steps)


def parse(text: str) -> LogParser:
    parser = LogParser()
    parser.feed(text)
    parser.finish()
    return parser


def test_run_that_dies_in_warmup_reports_from_the_steps_it_has():
    parser = parse(lines(range(1, 6), 50))
    used = parser.summary()["metrics_steps"]
    assert (used["basis"], used["first_step"], used["last_step"], used["count"]) == ("after_first_step", 2, 5, 4)
    assert parser.metrics()["training.elapsed_time_per_iteration"] == pytest.approx(1003.5)
    assert parser.metrics()["training.throughput_per_gpu"] == pytest.approx(480.0)
    single = parse(lines([1], 50))
    assert single.summary()["metrics_steps"]["basis"] == "first_step"
    assert single.metrics()["training.elapsed_time_per_iteration"] == pytest.approx(1001.0)


def test_resumed_log_treats_the_first_steps_after_the_restart_as_warmup():
    parser = parse(lines(range(14001, 15551), 15550))
    used = parser.summary()["metrics_steps"]
    assert parser.warmup_cutoff == 14155  # 10 % of the 1550 steps this run does
    assert (used["basis"], used["first_step"], used["last_step"]) == ("steady", 14156, 15550)
    assert parser.metrics()["training.step_time_p50_ms"] == pytest.approx(1000.0 + (14156 + 15550) / 2)


def test_restart_inside_one_log_reports_the_latest_attempt():
    parser = parse(lines(range(1, 61), 80, ms=lambda s: 5000.0) + lines(range(31, 81), 80))
    used = parser.summary()["metrics_steps"]
    assert used["restarts"] == 1 and (used["first_step"], used["last_step"]) == (36, 80)
    assert parser.metrics()["training.elapsed_time_per_iteration"] == pytest.approx(1000.0 + (36 + 80) / 2)
    assert parser.iterations[40].elapsed_ms == 1040.0  # the curve keeps the last line of a step


@pytest.mark.parametrize("number", ["9223372036854775808", "1" * 3000])
def test_absurd_iteration_numbers_are_skipped_and_counted(number):
    bad = LINE.format(s=1, t=20, c=1, ms=1.0).replace("       1/", f" {number}/")
    parser = LogParser()
    for piece in (lines(range(1, 4), 20), bad, lines(range(4, 6), 20)):
        parser.feed(piece)  # the live watcher's path
    parser.finish()
    assert sorted(parser.iterations) == [1, 2, 3, 4, 5] and parser.lines_skipped == 1
    assert parser.summary()["iterations"] == 5


def test_a_100_mb_line_without_newline_is_skipped_with_bounded_memory():
    parser = LogParser()
    parser.feed(lines(range(1, 3), 20))
    chunk = b"x" * (1 << 20)
    for _ in range(100):
        parser.feed_bytes(chunk)
        assert len(parser._tail) < (4 << 20)
    parser.feed_bytes(b"still the same line\n" + lines(range(3, 5), 20).encode())
    parser.finish()
    assert sorted(parser.iterations) == [1, 2, 3, 4] and parser.lines_skipped == 1
    assert parser.lines == 5
    whole = LogParser()
    whole.feed_bytes(lines(range(1, 3), 20).encode() + b"y" * (5 << 20) + b"\n" + lines(range(3, 5), 20).encode())
    whole.finish()
    assert (sorted(whole.iterations), whole.lines_skipped, whole.lines) == ([1, 2, 3, 4], 1, 5)


def test_special_files_are_refused_with_exit_2(tmp_path):
    fifo = tmp_path / "training.fifo"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "FIFO"), ("/dev/zero", "device"), (tmp_path, "directory")):
        for task in (parse_task, scan_task):
            with pytest.raises(Exit) as exc:
                task(Context(), str(path))
            assert exc.value.code == 2 and kind in exc.value.message


def test_parse_and_scan_exit_1_on_a_fatal_log(tmp_path, capsys):
    log = tmp_path / "t.log"
    log.write_text(lines(range(1, 4), 20) + "[rank4]: FileNotFoundError: [Errno 2] No such file: '/data/x'\n")
    for task in (parse_task, scan_task):
        with pytest.raises(Exit) as exc:
            task(Context(), str(log))
        assert exc.value.code == 1 and "python_exception" in exc.value.message
    assert "root cause: python_exception at line 4" in capsys.readouterr().out
    assert parse_file(log).root_cause.line == 4


@pytest.mark.parametrize("task", ["logs.parse", "logs.scan"])
def test_output_into_a_closed_pipe_ends_quietly(tmp_path, task):
    log = tmp_path / "t.log"
    log.write_text(lines(range(1, 3), 20) + "gpu-node-03:1:2 [3] NCCL WARN NET/IB : Got async event\n" * 3000)
    shell = f"{sys.executable} -m invoke {task} {log} --json | head -n 2; exit ${{PIPESTATUS[0]}}"
    done = subprocess.run(["bash", "-c", shell], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines()[0] in ("{", "[")
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.returncode == 0
