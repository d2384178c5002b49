"""`invoke report` (run at the end of every run) reads a node log around the first failure with the
memory bound of `logs.parse`: a 96 MB single line used to cost twice its size (4.3 GB for 2 GB)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.unit.report.conftest import FIXTURES

REPO = Path(__file__).resolve().parents[3]
LINE_MB = 96
PEAK_LIMIT_MB = 200  # measured 63 MB after the fix (a 200 MB line: 475 MB before, 63 MB after)


# A fork starts with its parent's pages, and Linux counts them in the child's peak RSS even after
# exec: measured straight from pytest (hundreds of MB by then) the figure is pytest's. So a small
# Python process starts the command and reports the peak of that grandchild alone.
MEASURE = ("import os, subprocess, sys\n"
           "p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,"
           " stderr=subprocess.DEVNULL)\n"
           "_, status, usage = os.wait4(p.pid, 0)\n"
           "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)\n")


def _peak_rss_mb(args: list[str], env: dict[str, str]) -> tuple[int, float]:
    """(exit status, peak RSS in MB) of one command, from its own rusage."""
    out = subprocess.run([sys.executable, "-c", MEASURE, *args], cwd=REPO, env=env, capture_output=True,
                         text=True, check=True, timeout=300).stdout
    code, kib = out.split()
    return int(code), int(kib) / 1024


def test_a_long_line_near_the_first_failure_is_read_in_bounded_memory(tmp_path):
    run = tmp_path / "reports" / "20260101-000000-long"
    shutil.copytree(FIXTURES / "failed_nccl", run)
    log = run / "logs/training/MBS_4_GBS_128_PRECISION_FP8/out-node1/training.log"
    lines = log.read_bytes().splitlines(keepends=True)
    with open(log, "wb") as fh:  # line 8, right before the failing line 9, is LINE_MB long
        fh.writelines(lines[:7])
        block = b"x" * (1 << 20)
        for _ in range(LINE_MB):
            fh.write(block)
        fh.write(b"\n")
        fh.writelines(lines[8:])
    env = dict(os.environ, CVS_REPORTS_DIR=str(run.parent), PYTHONPATH=str(REPO))
    code, peak = _peak_rss_mb([sys.executable, "-m", "invoke", "report", "--run", str(run)], env)
    assert code == 1  # the fixture's verdict is FAIL
    assert peak < PEAK_LIMIT_MB, f"peak RSS {peak:.0f} MB for a {LINE_MB} MB line"
    context = json.loads((run / "results.json").read_text())["first_failure"]["context"]
    assert [n for n, _ in context] == [6, 7, 8, 9, 10, 11] and context[2][1] == "x" * 300
