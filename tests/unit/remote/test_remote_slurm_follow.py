"""Slurm's followers: the task wrapper in real bash, the record demultiplexer, and SlurmHosts.follow
as one step per job (an srun stand-in first on PATH runs the tasks here; tests/slurm_fakes.py)."""

from __future__ import annotations

import base64
import os
import random
import signal
import subprocess
import threading
import time

import pytest

from cvs_tasks.remote.follow import FollowTarget
from cvs_tasks.remote.follower import FOLLOWER_NAME, PROGRAM, FollowerArgs
from cvs_tasks.remote.frames import DataFrame, ExitFrame, FrameDecoder
from cvs_tasks.remote.slurm import Allocation, SlurmClient, SlurmHosts
from cvs_tasks.remote.slurm_cmd import SlurmNode
from cvs_tasks.remote.slurm_follow import WRAPPER, RecordDemux, follow_command, follow_table
from tests.follow_helpers import FAST, follow_to_end
from tests.slurm_fakes import install_fake_srun, srun_calls


def args_for(log, ex, offset=0) -> FollowerArgs:
    return FollowerArgs(str(log), str(ex), offset, FAST.poll_s, FAST.frame_bytes, FAST.heartbeat_s)


def test_the_wrapper_carries_its_nodes_frames_as_short_records_that_rebuild_them_exactly(tmp_path):
    rng = random.Random(5)
    log, ex = tmp_path / "a log with spaces", tmp_path / "exit"
    log.write_bytes(bytes(rng.getrandbits(8) for _ in range(7000)) + b"\n" + b"x" * 3000)  # one 3 KB line
    ex.write_text("4\n")
    table = follow_table(["n0", "n1"], [args_for(tmp_path / "other", ex), args_for(log, ex, 100)])
    done = subprocess.run(["bash", "-c", WRAPPER, "w", PROGRAM, "0.050", "1000", "1"], input=table,
                          capture_output=True, env={**os.environ, "SLURMD_NODENAME": "n1"}, timeout=30)
    assert done.stderr == b"" and done.returncode == 0
    lines = done.stdout.split(b"\n")[:-1]
    assert all(len(line) < 1024 and line.startswith(b"CVSF 1 ") for line in lines)
    demux = RecordDemux(2)
    touched, _ = demux.feed(done.stdout)
    assert touched == {1} and demux.rows[1].ended == 0
    frames = FrameDecoder(1000).feed(demux.take_out(1))
    assert b"".join(f.data for f in frames if isinstance(f, DataFrame)) == log.read_bytes()[100:]
    assert frames[-1] == ExitFrame(4, log.stat().st_size)


def test_records_of_two_nodes_interleaved_line_by_line_come_apart_whole():
    payloads = [b"first\nnode", b"second " * 200]
    streams = []
    for row, data in enumerate(payloads):
        text = base64.b64encode(data)
        pieces = [b"CVSF %d d %s\n" % (row, text[k:k + 760]) for k in range(0, len(text), 760)]
        streams.append([b"CVSF %d h H -\n" % row, b"CVSF %d h D 0 %d\n" % (row, len(data)), *pieces,
                        b"CVSF %d h P %d\n" % (row, len(data)), b"CVSF %d end 0\n" % row])
    merged = b"".join(line for pair in zip(*[s + [b""] * 10 for s in streams]) for line in pair)
    demux = RecordDemux(2)
    answers = []
    for k in range(0, len(merged), 333):  # any cut of the pipe's chunks
        answers += demux.feed(merged[k:k + 333])[1]
    assert sorted(answers) == [0, 1]
    for row, data in enumerate(payloads):
        assert demux.take_out(row) == b"H -\nD 0 %d\n%s\nP %d\n" % (len(data), data, len(data))
        assert demux.rows[row].ended == 0


def test_a_broken_record_ends_that_row_only():
    demux = RecordDemux(2)
    demux.feed(b"CVSF 0 h D 0 3\nCVSF 0 d !!!\nCVSF 1 h H 5\nCVSF 0 h H 3\nnot a record\n")
    assert "not base64" in demux.rows[0].broken and demux.rows[1].broken is None
    assert demux.take_out(1) == b"H 5\n" and demux.stray == b"not a record"


def test_the_step_line_and_the_table_keep_paths_out_of_argv():
    args = args_for("/runs/r1/node0.log", "/runs/r1/node0.exit")
    argv = follow_command("9", ["gpu01", "gpu02"], args, ["--container-name=c"])
    assert argv[:9] == ["srun", "--jobid=9", "--overlap", "--nodes=2", "--ntasks-per-node=1",
                        "--nodelist=gpu01,gpu02", "--input=all", "--quiet", "--kill-on-bad-exit=0"]
    assert argv[9:11] == ["--container-name=c", "bash"] and "/runs/r1" not in " ".join(argv)
    table = follow_table(["gpu01"], [args])
    assert table.startswith(b"CVS-FOLLOW 1\ngpu01 0 ") and len(table.splitlines()) == 2
    with pytest.raises(ValueError):
        follow_command("9", ["gpu01"], FollowerArgs("/l", "/e", 0, 0.0, 10, 1))


# -- SlurmHosts.follow through the srun stand-in -------------------------------------------------

def slurm_hosts(count: int) -> SlurmHosts:
    nodes = tuple(SlurmNode(f"gpu{i:02d}", f"10.0.0.{i + 1}", "ALLOCATED") for i in range(count))
    return SlurmHosts(SlurmClient(), Allocation("9", nodes, owned=True))


def write_slowly(logs, exits, lines: int, pause: float) -> threading.Thread:
    def run():
        for k in range(lines):
            for i, log in enumerate(logs):
                with open(log, "ab") as out:
                    out.write(b"iteration %d node %d %s\n" % (k, i, b"y" * (k * 37 % 2500)))
            time.sleep(pause)
        for ex in exits:
            ex.write_text("0\n")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def follower_pid(log) -> int | None:
    """The follower process of ``log`` (argv: bash -c PROGRAM cvs-follow LOG ...), found by its arguments."""
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except OSError:
            continue
        if FOLLOWER_NAME.encode() in argv and str(log).encode() in argv and argv[0] == b"bash":
            return int(pid)
    return None


def test_four_nodes_are_followed_by_one_step_and_a_killed_follower_by_one_more(tmp_path, monkeypatch):
    install_fake_srun(tmp_path / "bin", tmp_path / "calls", monkeypatch)
    logs = [tmp_path / f"node{i}.log" for i in range(4)]
    exits = [tmp_path / f"node{i}.exit" for i in range(4)]
    writer = write_slowly(logs, exits, lines=40, pause=0.05)
    killed = []

    def kill_one(event):
        if not killed and logs[2].exists() and logs[2].stat().st_size > 20_000:
            pid = follower_pid(logs[2])
            if pid:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

    with slurm_hosts(4).follow([FollowTarget(str(log), str(ex)) for log, ex in zip(logs, exits)], FAST) as follow:
        held, seen = follow_to_end(follow, 4, deadline_s=60, on_event=kill_one)
    writer.join(timeout=30)
    assert seen["exits"] == {0: 0, 1: 0, 2: 0, 3: 0}
    assert [held[i] == logs[i].read_bytes() for i in range(4)] == [True] * 4
    calls = srun_calls(tmp_path / "calls")
    assert killed and len(seen["losses"]) == 1 and "node gpu02" in seen["losses"][0]
    assert [c[2] for c in calls] == ["--nodes=4", "--nodes=1"] and "--nodelist=gpu02" in calls[1]


def test_a_drain_pokes_every_follower_of_the_step_with_one_newline(tmp_path, monkeypatch):
    install_fake_srun(tmp_path / "bin", tmp_path / "calls", monkeypatch)
    logs = [tmp_path / f"node{i}.log" for i in range(3)]
    for log in logs:
        log.write_bytes(b"")
    slow = FAST.__class__(poll_s=30.0, frame_bytes=1000, heartbeat_s=30)  # only a poke makes them look
    targets = [FollowTarget(str(log), str(tmp_path / f"exit{i}")) for i, log in enumerate(logs)]
    with slurm_hosts(3).follow(targets, slow) as follow:
        follow.drain(20)  # the first look
        for i, log in enumerate(logs):
            log.write_bytes(b"written before the drain %d\n" % i)
        events = follow.drain(20)
        step = next(iter(follow._sources))
    got = {e.index: e.data for e in events if hasattr(e, "data")}
    assert got == {i: b"written before the drain %d\n" % i for i in range(3)}
    assert step._owed == [0, 0, 0]
