"""Reading a log file from disk in chunks: the only file I/O in the metrics package.

``parse_file`` hands raw bytes to ``LogParser.feed_bytes``, which cuts them at line ends and
never decodes what it does not read as text. Only regular files are read: a FIFO, a device or
a directory is refused with a clear error instead of hanging. Memory stays at one chunk plus the
parser's bounded state, whatever the file size.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterator

from cvs_tasks.errors import BadInput
from cvs_tasks.metrics.parser import LogParser

CHUNK_BYTES = 1 << 20
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def check_regular(path: str | Path) -> None:
    """Refuse anything but a regular file before opening it (a FIFO or /dev/zero never ends)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise BadInput(f"log file not found: {path}") from None
    except OSError as exc:
        raise BadInput(f"cannot read log file {path}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise BadInput(f"cannot read log file {path}: it is {kind}; give a regular file "
                       f"(copy a live log first, e.g. cp {path} /tmp/training.log)")


def iter_byte_chunks(path: str | Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Raw bytes of a regular file, ``chunk_bytes`` at a time (chunks may end mid-line)."""
    check_regular(path)
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise BadInput(f"cannot read log file {path}: {exc.strerror}") from None
    with handle:
        while True:
            data = handle.read(chunk_bytes)
            if not data:
                break
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
