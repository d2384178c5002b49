"""SshHosts.follow against a real sshd on loopback: one exec channel per node, killed followers mended."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from cvs_tasks.remote import connect
from cvs_tasks.remote.follow import Delta, FollowTarget
from tests.follow_helpers import FAST, follow_to_end, follower_pids


def writer(log: Path, exit_file: Path, stop: Path) -> subprocess.Popen:
    line = "echo \"iteration $i $(printf '%0200d' $i)\""
    return subprocess.Popen(["bash", "-c", f"i=0; while [ ! -e {stop} ] && [ $i -lt 5000 ]; do i=$((i+1)); "
                                           f"{line} >> {log}; sleep 0.005; done; echo 0 > {exit_file}"])


def test_ssh_followers_stream_every_nodes_log_byte_for_byte(sshd, make_cluster, trusted, tmp_path):
    logs = [tmp_path / f"n{i}.log" for i in range(2)]
    stops = [tmp_path / f"stop{i}" for i in range(2)]
    writers = [writer(log, Path(f"{log}.exit"), stop) for log, stop in zip(logs, stops)]

    def stop_late(event):
        if isinstance(event, Delta) and event.end > 40_000:
            stops[event.index].touch()

    try:
        with connect(make_cluster([sshd, sshd], trusted), connect_timeout=5) as hosts:
            with hosts.follow([FollowTarget(str(p), f"{p}.exit") for p in logs], FAST) as follow:
                held, seen = follow_to_end(follow, 2, on_event=stop_late)
    finally:
        for stop, proc in zip(stops, writers):
            stop.touch()
            proc.wait(timeout=30)
    assert seen == {"exits": {0: 0, 1: 0}, "losses": []}
    assert held == [p.read_bytes() for p in logs]


def test_killing_a_followers_process_on_the_node_mid_run_loses_no_byte(sshd, make_cluster, trusted, tmp_path):
    log, ex, stop = tmp_path / "training.log", tmp_path / "exit", tmp_path / "stop"
    proc = writer(log, ex, stop)
    killed = []

    def kill_once(event):
        if isinstance(event, Delta) and not killed and event.end > 20_000:
            [pid] = follower_pids(log)  # the node is this machine: its follower runs under sshd here
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        if killed and isinstance(event, Delta) and event.end > 60_000:
            stop.touch()

    try:
        with connect(make_cluster([sshd], trusted), connect_timeout=5) as hosts:
            with hosts.follow([FollowTarget(str(log), str(ex))], FAST) as follow:
                [held], seen = follow_to_end(follow, 1, on_event=kill_once)
    finally:
        stop.touch()
        proc.wait(timeout=30)
    assert killed and len(seen["losses"]) == 1, seen
    assert "node node0" in seen["losses"][0] and "the follower ended" in seen["losses"][0]
    assert seen["exits"] == {0: 0}
    assert held == log.read_bytes()


def test_a_dropped_connection_is_reopened_and_the_follower_resumes_at_the_held_offset(sshd, make_cluster, trusted,
                                                                                      tmp_path):
    log, ex, stop = tmp_path / "training.log", tmp_path / "exit", tmp_path / "stop"
    proc = writer(log, ex, stop)
    dropped = []
    with connect(make_cluster([sshd], trusted), connect_timeout=5) as hosts:
        def drop_once(event):
            if isinstance(event, Delta) and not dropped and event.end > 20_000:
                hosts._ssh[0].connection.transport.close()  # the TCP connection goes away under the follower
                dropped.append(event.end)
            if dropped and isinstance(event, Delta) and event.end > 60_000:
                stop.touch()

        try:
            with hosts.follow([FollowTarget(str(log), str(ex))], FAST) as follow:
                [held], seen = follow_to_end(follow, 1, on_event=drop_once)
        finally:
            stop.touch()
            proc.wait(timeout=30)
    assert dropped and len(seen["losses"]) == 1, seen
    assert seen["exits"] == {0: 0}
    assert held == log.read_bytes()
