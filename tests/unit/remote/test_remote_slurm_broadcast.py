"""One Slurm step per broadcast: the bundle, the task program (run here by bash) and the records."""

from __future__ import annotations

import base64
import os
import random
import subprocess

import pytest

from cvs_tasks.remote import slurm_broadcast as sb
from cvs_tasks.remote.results import RawResult


def run_task(bundle: bytes, node: str) -> subprocess.CompletedProcess:
    """The task program as one Slurm task on ``node`` would run it (srun gives it the bundle on stdin)."""
    env = {**os.environ, "SLURMD_NODENAME": node}
    return subprocess.run(["bash", "-c", sb.TASK_PROGRAM, "cvs-broadcast", "60"], input=bundle, capture_output=True,
                          env=env, timeout=60)


def test_identical_commands_and_stdins_are_stored_once():
    one = sb.build_bundle(["a", "b", "c"], ["echo hi"] * 3, [b"data"] * 3)
    header, rest = one[:sb.HEADER_BYTES], one[sb.HEADER_BYTES:]
    assert header == b"CVS-BUNDLE 00000003 %012d\n" % len(b"a 0:7 7:4\nb 0:7 7:4\nc 0:7 7:4\n")
    assert rest == b"a 0:7 7:4\nb 0:7 7:4\nc 0:7 7:4\necho hidata"
    mixed = sb.build_bundle(["a", "b"], ["x", "y"], [None, b""])
    assert mixed.endswith(b"a 0:1 -\nb 1:1 2:0\nxy")


def test_bad_bundles_are_refused():
    with pytest.raises(ValueError, match="one command"):
        sb.build_bundle(["a"], ["x", "y"], [None])
    with pytest.raises(ValueError, match="distinct"):
        sb.build_bundle(["a", "a"], ["x", "y"], [None, None])
    with pytest.raises(ValueError, match="without spaces"):
        sb.build_bundle(["a b"], ["x"], [None])


def test_every_record_fits_in_one_slurmstepd_message():
    widest = b"CVS1 1023 o " + b"A" * sb.LINE_CHARS + b"\n"
    assert len(widest) < sb.RECORD_MAX - 100  # room for indexes up to 10^100 nodes and more


def test_the_task_runs_its_own_command_with_its_own_stdin_and_reports_it_whole():
    names = ["n0", "n1", "n2"]
    rng = random.Random(3)
    blob = bytes(rng.getrandbits(8) for _ in range(5000))
    bundle = sb.build_bundle(names, ["echo zero", "cat; echo oops >&2; exit 5", "printf '%s' \"$0\" >&2"],
                             [None, blob, None])
    done = run_task(bundle, "n1")
    assert done.returncode == 0 and done.stderr == b""
    lines = done.stdout.splitlines()
    assert all(len(line) < sb.RECORD_MAX for line in lines) and len(lines) == 9 + 1 + 1  # stdout in 9 pieces
    reports, stray = sb.parse_records(done.stdout, 3)
    assert reports == [None, RawResult(5, blob, b"oops\n"), None] and stray == b""


def test_a_node_without_a_row_says_so_and_reports_nothing():
    done = run_task(sb.build_bundle(["n0"], ["true"], [None]), "elsewhere")
    assert done.returncode == sb.NO_ROW_EXIT and b"no command for node elsewhere" in done.stderr
    assert done.stdout == b""


def test_a_thousand_and_twenty_four_distinct_commands_one_bundle():
    names = [f"gpu{i:04d}" for i in range(1024)]
    commands = [f"echo node {i}; printf '%0{i}d' 0 >&2" for i in range(1024)]
    bundle = sb.build_bundle(names, commands, [None] * 1024)
    assert len(bundle) < 80_000  # far below what stdin carries; argv would have refused 128 KiB in one argument
    done = run_task(bundle, "gpu1023")
    reports, _ = sb.parse_records(done.stdout, 1024)
    assert reports[1023] == RawResult(0, b"node 1023\n", b"0" * 1023)
    assert sum(r is not None for r in reports) == 1


def test_records_of_many_tasks_interleaved_line_by_line_demultiplex_exactly():
    rng = random.Random(7)
    outputs = [bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 3000))) for _ in range(5)]
    streams = []
    for i, data in enumerate(outputs):
        text = base64.b64encode(data)
        lines = [b"CVS1 %d o %s\n" % (i, text[k:k + 760]) for k in range(0, len(text), 760)]
        streams.append(lines + [b"CVS1 %d x %d %d 0\n" % (i, i, len(data))])
    merged = []
    while any(streams):
        stream = rng.choice([s for s in streams if s])
        merged.append(stream.pop(0))
    reports, stray = sb.parse_records(b"".join(merged) + b"slurmstepd: something else\n", 5)
    assert [(r.exit_code, r.stdout, r.error) for r in reports] == [(i, outputs[i], None) for i in range(5)]
    assert stray == b"slurmstepd: something else\n"


def test_lost_or_cut_output_is_that_nodes_error_and_never_a_result():
    good = b"CVS1 0 o aGk=\nCVS1 0 x 0 2 0\n"
    short = b"CVS1 1 o aGk=\nCVS1 1 x 0 5 0\n"  # the task wrote 5 bytes, 2 arrived
    cut = b"CVS1 2 o aG\nCVS1 2 x 0 2 0\n"  # a piece that is not base64 any more
    odd = b"CVS1 3 q zz\nCVS1 3 x 1 0 0\n"
    reports, _ = sb.parse_records(good + short + cut + odd + b"CVS1 4 o aGk=\n", 5)
    assert reports[0] == RawResult(0, b"hi", b"")
    assert reports[1].exit_code is None and "2+0 bytes of output where the task wrote 5+0" in reports[1].error
    assert reports[2].exit_code is None and "garbled" in reports[2].error
    assert reports[3].exit_code is None and "malformed record" in reports[3].error
    assert reports[4] is None  # no end record: the task never finished


def test_the_step_line_hands_the_bundle_to_every_task_and_keeps_container_options():
    argv = sb.broadcast_command("9", ["gpu01", "gpu02"], ["--container-name=c"], step_name="cvs-b1", limit_s=90.5)
    assert argv[:9] == ["srun", "--jobid=9", "--overlap", "--nodes=2", "--ntasks-per-node=1",
                        "--nodelist=gpu01,gpu02", "--input=all", "--quiet", "--kill-on-bad-exit=0"]
    assert argv[9:11] == ["--job-name=cvs-b1", "--time=3"]  # named, and Slurm's own limit past the task's 91 s
    assert argv[11:14] == ["--container-name=c", "bash", "-c"] and argv[14] == sb.TASK_PROGRAM
    assert argv[15:] == ["cvs-broadcast", "91"]
    assert len(sb.TASK_PROGRAM) < 4096


def test_a_task_whose_bundle_never_ends_gives_up_within_its_seconds():
    env = {**os.environ, "SLURMD_NODENAME": "n0"}
    waiting = subprocess.Popen(["bash", "-c", sb.TASK_PROGRAM, "cvs-broadcast", "1"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    waiting.stdin.write(b"CVS-BUNDLE 00000001")  # and never more, never EOF: srun was killed
    waiting.stdin.flush()
    assert waiting.wait(timeout=30) == 90  # stdin still open: the task's own bound ended the wait
    assert b"no whole bundle on stdin within 1 s" in waiting.stderr.read() and waiting.stdout.read() == b""
    waiting.stdin.close()


def test_a_command_that_outlives_the_broadcast_is_ended_by_its_task():
    bundle = sb.build_bundle(["n0"], ["echo started; sleep 60; echo never"], [None])
    env = {**os.environ, "SLURMD_NODENAME": "n0"}
    done = subprocess.run(["bash", "-c", sb.TASK_PROGRAM, "cvs-broadcast", "2"], input=bundle, capture_output=True,
                          env=env, timeout=30)
    assert sb.parse_records(done.stdout, 1)[0] == [RawResult(124, b"started\n", b"")]  # timeout(1)'s status
