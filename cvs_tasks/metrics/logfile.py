"""Reading a log file from disk in chunks: the only file I/O in the metrics package.

``parse_file`` hands raw bytes to ``LogParser.feed_bytes``, which cuts them at line ends before
decoding (a multi-byte character never spans a newline) and decodes with ``errors="replace"``,
so bad bytes become U+FFFD instead of an exception. ``iter_text_chunks`` decodes with an
incremental decoder for callers that want text. Memory stays at one chunk plus the parser's
bounded columns (``retention``), whatever the file size.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Iterator

from cvs_tasks.errors import BadInput
from cvs_tasks.metrics.parser import LogParser

CHUNK_BYTES = 4 << 20


def iter_byte_chunks(path: str | Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Raw bytes of a file, ``chunk_bytes`` at a time (chunks may end mid-line or mid-character)."""
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        raise BadInput(f"log file not found: {path}") from None
    except (IsADirectoryError, PermissionError) as exc:
        raise BadInput(f"cannot read log file {path}: {exc.strerror}") from None
    with handle:
        while True:
            data = handle.read(chunk_bytes)
            if not data:
                break
            yield data


def iter_text_chunks(path: str | Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[str]:
    """Decoded text of a file, ``chunk_bytes`` at a time (chunks may end mid-line)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    for data in iter_byte_chunks(path, chunk_bytes):
        text = decoder.decode(data)
        if text:
            yield text
    rest = decoder.decode(b"", final=True)
    if rest:
        yield rest


def parse_file(path: str | Path, chunk_bytes: int = CHUNK_BYTES, **parser_args) -> LogParser:
    """A finished ``LogParser`` over a whole file (``parser_args`` go to its constructor).

    Bytes go to ``LogParser.feed_bytes``: the parser decodes only what it has to read as text.
    """
    parser = LogParser(**parser_args)
    for data in iter_byte_chunks(path, chunk_bytes):
        parser.feed_bytes(data)
    parser.finish()
    return parser
