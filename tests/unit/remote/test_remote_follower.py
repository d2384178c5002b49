"""The node-side follower in real bash against real files, alone and through LocalHosts.follow."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cvs_tasks.remote import LocalHosts, Node
from cvs_tasks.remote.follow import Delta, FollowTarget, Lost
from cvs_tasks.remote.follower import FollowerArgs
from cvs_tasks.remote.frames import BeatFrame, DataFrame, ErrorFrame, ExitFrame, FrameDecoder
from tests.follow_helpers import FAST, follow_to_end, follower_pids


def run_follower(log: Path, exit_file: Path, offset: int = 0, cap: int = 1000, timeout: float = 20,
                 env: dict | None = None) -> list:
    """Run the follower to its end (its stdin stays open and unpoked, as the harness holds it)."""
    args = FollowerArgs(str(log), str(exit_file), offset, 0.05, cap, 1)
    proc = subprocess.Popen(args.argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env)
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.wait(timeout=timeout)
    assert err == b""
    return FrameDecoder(cap).feed(out), proc.returncode


def data_of(frames) -> bytes:
    return b"".join(f.data for f in frames if isinstance(f, DataFrame))


def test_a_finished_log_is_sent_whole_in_capped_frames_then_the_exit(tmp_path):
    log, ex = tmp_path / "training.log", tmp_path / "exit"
    log.write_bytes(bytes(range(256)) * 20)  # every byte value, 5120 bytes
    ex.write_text("0\n")
    frames, code = run_follower(log, ex)
    assert code == 0 and data_of(frames) == log.read_bytes()
    assert [f.offset for f in frames if isinstance(f, DataFrame)] == [0, 1000, 2000, 3000, 4000, 5000]
    assert frames[-1] == ExitFrame(0, 5120)


def test_without_a_dd_that_buffers_a_frame_the_frames_are_written_in_pieces_alike(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "dd").write_text("#!/bin/sh\nexit 1\n")  # a dd without iflag=fullblock (busybox)
    (fake / "dd").chmod(0o755)
    log, ex = tmp_path / "training.log", tmp_path / "exit"
    log.write_bytes(bytes(range(256)) * 20)
    ex.write_text("0\n")
    frames, code = run_follower(log, ex, env=dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}"))
    assert code == 0 and data_of(frames) == log.read_bytes() and frames[-1] == ExitFrame(0, 5120)


def test_a_frame_leaves_the_follower_in_one_write(tmp_path):
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed (apt-get install strace)")
    log, ex = tmp_path / "training.log", tmp_path / "exit"
    log.write_bytes(b"x" * 3000)
    ex.write_text("0\n")
    args = FollowerArgs(str(log), str(ex), 0, 0.05, 1000, 1)
    done = subprocess.run(["strace", "-f", "-qq", "-e", "trace=write", "-e", "signal=none", *args.argv()],
                          stdin=subprocess.PIPE, capture_output=True, timeout=30)
    written = {int(line.rsplit("=", 1)[1]) for line in done.stderr.decode().splitlines() if 'write(1, "D ' in line}
    whole = {len(b"D %d 1000\n" % off) + 1000 + 1 for off in (0, 1000, 2000)}  # header, bytes, newline
    assert whole <= written, written  # (the pieces show too: the writes into dd's pipe)


def test_a_restart_from_an_offset_sends_exactly_the_rest(tmp_path):
    log, ex = tmp_path / "training.log", tmp_path / "exit"
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(500)))
    ex.write_text("137\n")
    frames, _ = run_follower(log, ex, offset=1234)
    assert data_of(frames) == log.read_bytes()[1234:] and frames[-1] == ExitFrame(137, log.stat().st_size)


def test_a_log_that_shrank_below_the_offset_is_an_error_frame(tmp_path):
    log, ex = tmp_path / "training.log", tmp_path / "exit"
    log.write_bytes(b"short\n")
    frames, code = run_follower(log, ex, offset=100)
    assert code == 3
    assert frames == [ErrorFrame("the log shrank to 6 bytes below the read offset 100 (truncated or replaced)")]


def test_garbage_in_the_exit_file_is_not_an_exit(tmp_path):
    log, ex = tmp_path / "training.log", tmp_path / "exit"
    log.write_bytes(b"x\n")
    ex.write_text("oops\n")
    args = FollowerArgs(str(log), str(ex), 0, 0.05, 1000, 1)
    proc = subprocess.Popen(args.argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        decoder, frames = FrameDecoder(1000), []
        while not any(isinstance(f, BeatFrame) and not f.answer for f in frames):  # a timed heartbeat: alive
            frames += decoder.feed(os.read(proc.stdout.fileno(), 4096))
        assert not any(isinstance(f, ExitFrame) for f in frames)
        ex.write_text("2\n")
        assert proc.wait(timeout=10) == 0
        frames += decoder.feed(proc.stdout.read())
        assert frames[-1] == ExitFrame(2, 2)
    finally:
        proc.kill()
        proc.wait()


def test_a_poke_is_answered_and_the_end_of_stdin_ends_the_follower(tmp_path):
    log = tmp_path / "training.log"
    args = FollowerArgs(str(log), str(tmp_path / "exit"), 0, 30.0, 1000, 60)  # it would sleep 30 s
    proc = subprocess.Popen(args.argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        decoder = FrameDecoder(1000)
        assert decoder.feed(proc.stdout.readline()) == [BeatFrame(None)]  # the first look: no log, a heartbeat
        log.write_bytes(b"new line\n")
        proc.stdin.write(b"\n")
        proc.stdin.flush()
        frames = []
        while not frames or not isinstance(frames[-1], BeatFrame):
            frames += decoder.feed(os.read(proc.stdout.fileno(), 4096))
        assert frames == [DataFrame(0, b"new line\n"), BeatFrame(9, answer=True)]
        started = time.monotonic()
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0 and time.monotonic() - started < 5
    finally:
        proc.kill()
        proc.wait()


def test_local_follow_reads_growing_logs_of_several_nodes(tmp_path):
    logs = [tmp_path / f"n{i}.log" for i in range(3)]
    writer = subprocess.Popen(["bash", "-c", " ".join(
        f"for i in $(seq 1 40); do echo \"node {i} line $i\" >> {log}; sleep 0.01; done; echo 0 > {log}.exit;"
        for i, log in enumerate(logs))])
    hosts = LocalHosts([Node(f"n{i}", "localhost", rank=i) for i in range(3)])
    with hosts.follow([FollowTarget(str(p), f"{p}.exit") for p in logs], FAST) as follow:
        held, seen = follow_to_end(follow, 3)
    writer.wait(timeout=30)
    assert seen == {"exits": {0: 0, 1: 0, 2: 0}, "losses": []}
    assert held == [p.read_bytes() for p in logs]


def test_killing_a_followers_process_mid_run_loses_no_byte(tmp_path):
    log, ex = tmp_path / "training.log", tmp_path / "exit"
    stop = tmp_path / "stop"
    line = "echo \"iteration $i $(printf '%0200d' $i)\""
    writer = subprocess.Popen(["bash", "-c", f"i=0; while [ ! -e {stop} ]; do i=$((i+1)); {line} >> {log}; "
                                             f"sleep 0.005; done; echo 0 > {ex}"])
    killed = []

    def kill_once(event):
        if isinstance(event, Delta) and not killed and event.end > 20_000:
            [pid] = follower_pids(log)
            os.kill(pid, signal.SIGKILL)  # on the node's side, the follower itself
            killed.append(pid)
        if killed and isinstance(event, Delta) and event.end > 60_000:
            stop.touch()

    try:
        with LocalHosts([Node("n0", "localhost")]).follow([FollowTarget(str(log), str(ex))], FAST) as follow:
            [held], seen = follow_to_end(follow, 1, on_event=kill_once)
    finally:
        stop.touch()
        writer.wait(timeout=30)
    assert killed and len(seen["losses"]) == 1 and "killed by signal 9" in seen["losses"][0]
    assert seen["exits"] == {0: 0}
    assert held == log.read_bytes()


def test_a_follower_that_cannot_start_is_a_lost_event(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bash to start
    hosts = LocalHosts([Node("n0", "localhost")])
    with hosts.follow([FollowTarget(str(tmp_path / "l"), str(tmp_path / "e"))], FAST) as follow:
        [lost] = follow.events(1.0)
    assert isinstance(lost, Lost) and lost.error.startswith("node n0 (localhost): following ")
    assert "cannot start the follower" in lost.error


def test_closing_the_follow_ends_every_follower(tmp_path):
    log = tmp_path / "training.log"
    log.write_text("x\n")
    with LocalHosts([Node("n0", "localhost")]).follow([FollowTarget(str(log), str(tmp_path / "e"))], FAST) as follow:
        assert follow.events(5.0)
        assert follower_pids(log)
    deadline = time.monotonic() + 10
    while follower_pids(log) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not follower_pids(log)


@pytest.mark.parametrize("bad", [dict(offset=-1), dict(frame_bytes=0), dict(poll_s=0)])
def test_follower_arguments_are_checked(bad):
    fields = dict(log_path="/l", exit_path="/e", offset=0, poll_s=1.0, frame_bytes=10, heartbeat_s=1) | bad
    with pytest.raises(ValueError):
        FollowerArgs(**fields).argv()


def test_a_composite_follows_every_part_from_one_loop(tmp_path):
    from cvs_tasks.remote import CompositeHosts

    logs = [tmp_path / f"n{i}.log" for i in range(3)]
    for i, log in enumerate(logs):
        log.write_text(f"node {i}\n")
        Path(f"{log}.exit").write_text("0\n")
    nodes = [Node(f"n{i}", "localhost", rank=i) for i in range(3)]
    hosts = CompositeHosts([(LocalHosts([nodes[1]]), [1]), (LocalHosts([nodes[0], nodes[2]]), [0, 2])], nodes)
    with hosts.follow([FollowTarget(str(p), f"{p}.exit") for p in logs], FAST) as follow:
        held, seen = follow_to_end(follow, 3)
    assert held == [b"node 0\n", b"node 1\n", b"node 2\n"] and seen["exits"] == {0: 0, 1: 0, 2: 0}


def test_a_drain_waits_for_a_follower_that_is_still_starting(tmp_path):
    from cvs_tasks.remote.streams import PipeStream, StreamFollow

    log = tmp_path / "training.log"
    log.write_text("written before the drain\n")

    def slow_start(_index, args):  # a loaded node: its session takes a while to start the follower
        return PipeStream(["bash", "-c", 'sleep 1; exec "$@"', "slow", *args.argv()])

    with StreamFollow([Node("n0", "n0")], [FollowTarget(str(log), str(tmp_path / "exit"))], FAST, slow_start) as follow:
        events = follow.drain(10.0)
    assert Delta(0, 0, b"written before the drain\n") in events
