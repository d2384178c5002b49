"""Reading a log file from disk in chunks: the only file I/O in the metrics package.

``parse_file`` hands raw bytes to ``LogParser.feed_bytes``, which cuts them at line ends and
never decodes what it does not read as text. Only regular files are read: a FIFO, a device or
a directory is refused with a clear error instead of hanging. Memory stays at one chunk plus the
parser's bounded state, whatever the file size.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

from cvs_tasks.inputs import open_regular
from cvs_tasks.metrics.parser import LogParser

CHUNK_BYTES = 1 << 20


def iter_byte_chunks(path: str | Path | int, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Raw bytes of a regular file, ``chunk_bytes`` at a time (chunks may end mid-line).

    ``inputs.open_regular`` refuses a FIFO, a device or a directory before a byte is read (a FIFO
    or /dev/zero never ends); a live log is read as far as it was written. An int is a descriptor
    the caller already opened and checked (e.g. ``run.sandbox.open_inside``); it is closed here.
    """
    with os.fdopen(path if isinstance(path, int) else open_regular(path, "log"), "rb") as handle:
        while data := handle.read(chunk_bytes):
            yield data


def parse_file(path: str | Path, chunk_bytes: int = CHUNK_BYTES, **parser_args) -> LogParser:
    """A finished ``LogParser`` over a whole file (``parser_args`` go to its constructor).

    Bytes go to ``LogParser.feed_bytes``: the parser decodes only what it has to read as text.
    """
    parser = LogParser(**parser_args)
    for data in iter_byte_chunks(path, chunk_bytes):
        parser.feed_bytes(data, collect=False)
    parser.finish()
    return parser


def line_heads(path: str | Path | int, keep: int, first: int = 1,
               chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[int, bytes]]:
    """``(line number, its first keep bytes)`` of every line from line ``first`` on, without the
    line end. Memory stays at one chunk plus ``keep`` bytes, whatever a line's length (a 2 GB line
    is cut, never held); chunks ending before line ``first`` are only counted."""
    n, head, partial = 1, bytearray(), False
    for chunk in iter_byte_chunks(path, chunk_bytes):
        newlines = chunk.count(b"\n")
        if n + newlines < first:  # every line this chunk ends comes before ``first``
            if newlines:
                n += newlines
                head = bytearray()
                start = chunk.rfind(b"\n") + 1
            else:
                start = 0
            head += chunk[start:start + max(0, keep - len(head))]
            partial = not chunk.endswith(b"\n")
            continue
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if n >= first:
                head += chunk[start:min(end, start + max(0, keep - len(head)))]
                yield n, bytes(head)
            n, head, start = n + 1, bytearray(), end + 1
        head += chunk[start:start + max(0, keep - len(head))]
        partial = not chunk.endswith(b"\n")
    if partial and n >= first:
        yield n, bytes(head)
