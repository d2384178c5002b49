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


def iter_byte_chunks(path: str | Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Raw bytes of a regular file, ``chunk_bytes`` at a time (chunks may end mid-line).

    ``inputs.open_regular`` refuses a FIFO, a device or a directory before a byte is read (a FIFO
    or /dev/zero never ends); a live log is read as far as it was written.
    """
    with os.fdopen(open_regular(path, "log"), "rb") as handle:
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
