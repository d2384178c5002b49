"""The follower's wire format: frames survive any split, and hostile bytes end the stream cleanly."""

from __future__ import annotations

import pytest

from cvs_tasks.remote.follow import Delta, take
from cvs_tasks.remote.frames import (
    MAX_HEADER,
    BeatFrame,
    DataFrame,
    ErrorFrame,
    ExitFrame,
    FrameDecoder,
    FrameError,
    encode,
)

FRAMES = [DataFrame(0, b"line one\n"), BeatFrame(9), DataFrame(9, b"\x00\xff D 1 2\n\n"), BeatFrame(None, answer=True),
          ErrorFrame("the log shrank"), ExitFrame(137, 20), ExitFrame(-1, None)]
STREAM = b"".join(encode(f) for f in FRAMES)


def test_every_frame_round_trips_in_one_piece():
    assert FrameDecoder(1024).feed(STREAM) == FRAMES


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64])
def test_frames_split_anywhere_come_out_the_same(size):
    decoder = FrameDecoder(1024)
    out = []
    for i in range(0, len(STREAM), size):
        out += decoder.feed(STREAM[i:i + size])
    assert out == FRAMES and decoder.pending == 0


def test_a_partial_frame_waits_for_the_rest():
    decoder = FrameDecoder(1024)
    assert decoder.feed(b"D 5 4\nab") == []
    assert decoder.feed(b"cd\nH -\n") == [DataFrame(5, b"abcd"), BeatFrame(None)]


@pytest.mark.parametrize("garbage", [
    b"hello world\n", b"D 1\n", b"D -1 2\nab\n", b"D 01 2\nab\n", b"X abc 1\n", b"H 1 2\n", b"Z\n",
    b"D 0 3\nabcd\n",  # payload longer than announced: no terminator where it should be
    b"x" * (MAX_HEADER + 1),  # no header line at all
])
def test_garbage_is_a_frame_error(garbage):
    with pytest.raises(FrameError):
        FrameDecoder(1024).feed(garbage)


def test_a_huge_length_is_refused_before_any_payload_is_buffered():
    with pytest.raises(FrameError, match="exceeds the agreed 1024"):
        FrameDecoder(1024).feed(b"D 0 99999999999999\n")


def test_take_never_gives_a_byte_twice_nor_across_a_gap():
    assert take(10, Delta(0, 10, b"abc")) == b"abc"
    assert take(12, Delta(0, 10, b"abcde")) == b"cde"
    assert take(15, Delta(0, 10, b"abcde")) == b""
    assert take(10, Delta(0, 11, b"bcd")) == b""
