"""The follower's wire format, and its incremental decoder (pure: bytes in, frames out).

A follower (``remote/follower.py``) writes one stream of frames per node; each starts with one
ASCII header line:

* ``D <offset> <length>\\n`` then exactly ``length`` log bytes, then ``\\n``: bytes
  ``[offset, offset + length)`` of the log (the trailing newline catches a payload cut short);
* ``X <code> <size|->\\n``: the job's exit status, after every byte up to ``size`` was sent;
* ``H <size|->\\n``: a heartbeat (the follower is alive, nothing new);
* ``P <size|->\\n``: the answer to a poke, after the look the poke asked for;
* ``E <text>\\n``: the follower cannot go on (the log shrank below its offset), then it ends.

The decoder never trusts the stream: a header longer than ``MAX_HEADER`` bytes, an unknown kind,
a malformed number, a length above the agreed frame size or a missing payload terminator is a
``FrameError``, and the stream is dropped (the follower is restarted from the harness's offset).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Union

MAX_HEADER = 256
_NUMBER = re.compile(rb"0|[1-9][0-9]{0,18}")
_CODE = re.compile(rb"-?[0-9]{1,9}")


class FrameError(ValueError):
    """The stream is not what a follower writes: stop reading it."""


@dataclass(frozen=True)
class DataFrame:
    offset: int
    data: bytes


@dataclass(frozen=True)
class ExitFrame:
    code: int
    size: int | None


@dataclass(frozen=True)
class BeatFrame:
    size: int | None
    answer: bool = False  # True: the answer to a poke (``P``), not a timed heartbeat (``H``)


@dataclass(frozen=True)
class ErrorFrame:
    text: str


Frame = Union[DataFrame, ExitFrame, BeatFrame, ErrorFrame]


def encode(frame: Frame) -> bytes:
    """The bytes a follower writes for ``frame`` (tests and scripted followers use it)."""
    if isinstance(frame, DataFrame):
        return b"D %d %d\n" % (frame.offset, len(frame.data)) + frame.data + b"\n"
    if isinstance(frame, ExitFrame):
        return b"X %d %s\n" % (frame.code, _size_field(frame.size))
    if isinstance(frame, BeatFrame):
        return (b"P %s\n" if frame.answer else b"H %s\n") % _size_field(frame.size)
    return b"E " + frame.text.replace("\n", " ").encode("utf-8", "replace") + b"\n"


class FrameDecoder:
    """Frames out of a byte stream that arrives in arbitrary pieces."""

    def __init__(self, max_data: int) -> None:
        self.max_data = max_data
        self._buf = bytearray()
        self._want: tuple[int, int] | None = None  # (offset, length) of the data frame being read

    @property
    def pending(self) -> int:
        """Bytes received but not yet part of a whole frame."""
        return len(self._buf)

    def feed(self, chunk: bytes) -> list[Frame]:
        self._buf += chunk
        frames: list[Frame] = []
        while True:
            if self._want is not None:
                offset, length = self._want
                if len(self._buf) < length + 1:
                    return frames
                if self._buf[length] != 0x0A:
                    raise FrameError(f"data frame at offset {offset} is not {length} bytes long")
                frames.append(DataFrame(offset, bytes(self._buf[:length])))
                del self._buf[:length + 1]
                self._want = None
                continue
            end = self._buf.find(b"\n", 0, MAX_HEADER + 1)
            if end < 0:
                if len(self._buf) > MAX_HEADER:
                    raise FrameError(f"no frame header in {_show(self._buf)}")
                return frames
            header = bytes(self._buf[:end])
            del self._buf[:end + 1]
            frame = self._header(header)
            if frame is not None:
                frames.append(frame)

    def _header(self, header: bytes) -> Frame | None:
        kind, _, rest = header.partition(b" ")
        fields = rest.split(b" ")
        if kind == b"D" and len(fields) == 2 and all(_NUMBER.fullmatch(f) for f in fields):
            offset, length = int(fields[0]), int(fields[1])
            if length > self.max_data:
                raise FrameError(f"data frame of {length} bytes exceeds the agreed {self.max_data}")
            self._want = (offset, length)
            return None
        if kind == b"X" and len(fields) == 2 and _CODE.fullmatch(fields[0]) and _size_ok(fields[1]):
            return ExitFrame(int(fields[0]), _size(fields[1]))
        if kind in (b"H", b"P") and len(fields) == 1 and _size_ok(fields[0]):
            return BeatFrame(_size(fields[0]), answer=kind == b"P")
        if kind == b"E":
            return ErrorFrame(rest.decode("utf-8", "replace"))
        raise FrameError(f"unknown frame header {_show(header)}")


def _size_ok(field: bytes) -> bool:
    return field == b"-" or _NUMBER.fullmatch(field) is not None


def _size(field: bytes) -> int | None:
    return None if field == b"-" else int(field)


def _size_field(size: int | None) -> bytes:
    return b"-" if size is None else b"%d" % size


def _show(data: bytes | bytearray, limit: int = 60) -> str:
    return repr(bytes(data[:limit])) + ("..." if len(data) > limit else "")
