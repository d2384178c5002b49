"""LocalHosts with real subprocesses: same semantics as SSH nodes (results, put, read_from)."""

from __future__ import annotations

import os
import select
import time

import pytest

from cvs_tasks.remote import LocalHosts, Node


@pytest.fixture
def two():
    return LocalHosts([Node("a", "a", rank=0), Node("b", "b", rank=1)])


def test_run_collects_output_and_names_failures(two):
    results = two.run(["echo one", "echo two >&2; exit 4"], timeout=10)
    assert [(r.host, r.rank, r.ok, r.exit_code) for r in results] == [
        ("a", 0, True, 0), ("b", 1, False, 4)]
    assert results[0].stdout == "one\n" and results[0].error is None
    assert results[1].error == "node b: exit status 4: two"


def test_command_count_must_match_the_nodes(two):
    with pytest.raises(ValueError, match="got 1 commands for 2 nodes"):
        two.run(["echo"], timeout=5)


def test_stdin_is_fed_and_never_on_the_command_line(two):
    results = two.run("cat; echo; ps -o args= -p $$", timeout=10, stdin="s3cret")
    for r in results:
        first, args = r.stdout.split("\n", 1)
        assert first == "s3cret" and "s3cret" not in args


def test_timeout_kills_the_whole_process_group():
    hosts = LocalHosts([Node("a", "a")])
    started = time.monotonic()
    [result] = hosts.run("sleep 30 & echo $!; sleep 30", timeout=0.5)
    assert time.monotonic() - started < 5
    assert (result.ok, result.exit_code) == (False, None)
    assert result.error == "node a: command timed out after 0.5s"
    background = int(result.stdout)  # the shell's child in the background: same process group
    try:
        pidfd = os.pidfd_open(background)  # readable once that process has ended
    except ProcessLookupError:
        return  # already ended and reaped
    try:
        ended, _, _ = select.select([pidfd], [], [], 5)
    finally:
        os.close(pidfd)
    assert ended, f"the background process {background} outlived the timeout by 5 s"


def test_put_is_atomic_with_mode_and_binary_safe(tmp_path):
    hosts = LocalHosts([Node("a", "a")])
    target = tmp_path / "sub" / "f.bin"
    data = bytes(range(256)) * 10
    [result] = hosts.put(data, str(target), 0o640, timeout=10)
    assert result.ok
    assert target.read_bytes() == data and target.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in target.parent.iterdir()) == ["f.bin"]


def test_put_failure_names_the_node_and_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    [result] = LocalHosts([Node("a", "a")]).put(b"x", str(blocker / "child"), timeout=10)
    assert not result.ok and result.error.startswith(f"node a: writing {blocker / 'child'}: exit status 1")


def test_put_each_writes_each_nodes_own_file_in_one_fan_out(tmp_path):
    hosts = LocalHosts([Node("a", "a"), Node("b", "b", rank=1)])
    calls = []
    inner = hosts._exec_many
    hosts._exec_many = lambda commands, stdins, timeout: calls.append(len(commands)) or inner(commands, stdins, timeout)
    files = [(b"for a", str(tmp_path / "a.sh")), (b"for b", str(tmp_path / "b.sh"))]
    results = hosts.put_each(files, 0o700, timeout=10)
    assert [r.ok for r in results] == [True, True] and calls == [2]
    assert (tmp_path / "a.sh").read_bytes() == b"for a" and (tmp_path / "b.sh").read_bytes() == b"for b"
    assert (tmp_path / "b.sh").stat().st_mode & 0o777 == 0o700
    with pytest.raises(ValueError, match="one file per node"):
        hosts.put_each(files[:1], timeout=10)


def test_read_from_is_incremental_in_bytes(tmp_path):
    log = tmp_path / "train.log"
    hosts = LocalHosts([Node("a", "a")])
    [missing] = hosts.read_from([str(log)], [0], 64, timeout=10)
    assert (missing.data, missing.offset, missing.size, missing.error) == ("", 0, None, None)

    text = "iteration 1 | loss 9.5 | 💥 ünïcode\n"
    log.write_text(text, encoding="utf-8")
    offset, pieces = 0, []
    for _ in range(20):  # 7-byte reads cut multibyte characters; none may be corrupted
        [r] = hosts.read_from([str(log)], [offset], 7, timeout=10)
        assert r.error is None
        pieces.append(r.data)
        offset = r.offset
        if offset == len(text.encode()):
            break
    assert "".join(pieces) == text and "\ufffd" not in "".join(pieces)

    with log.open("a", encoding="utf-8") as fh:
        fh.write("iteration 2\n")
    [r] = hosts.read_from([str(log)], [offset], 1024, timeout=10)
    assert r.data == "iteration 2\n" and r.offset == log.stat().st_size
    assert r.size == log.stat().st_size


def test_read_from_sidecar_and_per_node_paths(tmp_path, two):
    (tmp_path / "a.log").write_text("A")
    (tmp_path / "a.rc").write_text("137\n")
    results = two.read_from([str(tmp_path / "a.log"), str(tmp_path / "b.log")], [0, 5], 16,
                            sidecars=[str(tmp_path / "a.rc"), str(tmp_path / "b.rc")], timeout=10)
    assert [(r.host, r.data, r.offset, r.size, r.sidecar) for r in results] == [
        ("a", "A", 1, 1, "137\n"), ("b", "", 5, None, None)]


def test_read_from_reports_a_file_that_shrank(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("short")
    [r] = LocalHosts([Node("a", "a")]).read_from([str(log)], [100], 16, timeout=10)
    assert (r.data, r.offset, r.size) == ("", 100, 5)
    assert r.error == f"node a: {log} shrank to 5 bytes below the read offset 100 (truncated or replaced)"


def test_read_from_invalid_bytes_are_replaced_not_held_forever(tmp_path):
    log = tmp_path / "x.log"
    log.write_bytes(b"ok\xff\xfeend")
    [r] = LocalHosts([Node("a", "a")]).read_from([str(log)], [0], 64, timeout=10)
    assert r.data == "ok\ufffd\ufffdend" and r.offset == 7
