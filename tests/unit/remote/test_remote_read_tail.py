"""``read_tail``: the one reader of a follower's stderr (pipe followers and Slurm's follow step)."""

from __future__ import annotations

import os

from cvs_tasks.remote.streams import read_tail


def _pipe() -> tuple[int, int]:
    r, w = os.pipe()
    os.set_blocking(r, False)
    return r, w


def test_what_the_pipe_holds_is_appended_and_cut_to_the_last_bytes():
    r, w = _pipe()
    try:
        os.write(w, b"0123456789")
        assert read_tail(r, b"ab", keep=5) == b"56789"
        os.write(w, b"xy")
        assert read_tail(r, b"56789", keep=5) == b"789xy"
    finally:
        os.close(r)
        os.close(w)


def test_an_empty_pipe_still_open_returns_the_tail_unchanged():
    r, w = _pipe()
    try:
        assert read_tail(r, b"kept") == b"kept"
    finally:
        os.close(r)
        os.close(w)


def test_more_than_one_chunk_is_read_until_the_writer_is_gone():
    r, w = _pipe()
    os.write(w, b"a" * 30_000 + b"\nlast line\n")
    os.close(w)
    try:
        assert read_tail(r, b"", keep=20) == (b"a" * 30_000 + b"\nlast line\n")[-20:]
    finally:
        os.close(r)


def test_a_closed_descriptor_returns_the_tail():
    r, w = _pipe()
    os.close(r)
    os.close(w)
    assert read_tail(r, b"why it ended") == b"why it ended"
