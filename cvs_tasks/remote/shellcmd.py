"""Pure builders and parsers for the shell commands every transport shares (put, read_from).

The same strings run over SSH and locally, so both transports behave alike and the tests of
these functions pin the exact text that travels. POSIX sh only: a node's login shell may be
dash, bash or zsh.
"""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass

READ_MARKER = "CVSREAD"
SIDECAR_MAX_BYTES = 4096


def put_command(path: str, mode: int) -> str:
    """Write stdin to ``path`` atomically with ``mode``: a temp file beside it, chmod, rename.

    The content never appears on the command line (secrets travel on stdin only); umask 077
    keeps the temp file private until chmod sets the requested mode.
    """
    if not path:
        raise ValueError("put needs a destination path")
    if not 0 <= mode <= 0o7777:
        raise ValueError(f"file mode {mode!r} is out of range")
    target = shlex.quote(path)
    tmp = shlex.quote(path + ".cvs-tmp") + ".$$"
    parent = posixpath.dirname(path)
    mkdir = f"mkdir -p {shlex.quote(parent)} && " if parent not in ("", "/") else ""
    return (
        f"umask 077 && {mkdir}cat > {tmp} && chmod {mode:o} {tmp} && mv -f {tmp} {target}"
        f" || {{ rm -f {tmp}; exit 1; }}"
    )


def read_command(path: str, offset: int, max_bytes: int, sidecar: str | None = None) -> str:
    """One command that prints a header line and then at most ``max_bytes`` past ``offset``.

    Header: ``CVSREAD <size|-> <sidecar hex|->``; ``-`` means missing. The size is taken before
    the bytes are read, so the file may have grown since: the caller advances the offset by the
    bytes it actually received, never by the size.
    """
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    if max_bytes < 4:
        raise ValueError(f"max_bytes must be >= 4 (one UTF-8 character), got {max_bytes}")
    parts = [
        f"f={shlex.quote(path)}",
        'if [ -f "$f" ]; then n=$(wc -c < "$f") || exit 1; n=$((n)); else n=-; fi',
    ]
    if sidecar:
        parts += [
            f"s={shlex.quote(sidecar)}",
            'if [ -f "$s" ]; then '
            f'h=$(head -c {SIDECAR_MAX_BYTES} "$s" | od -An -v -tx1 | tr -d \' \\n\'); '
            "else h=-; fi",
        ]
    else:
        parts.append("h=-")
    parts += [
        f"printf '{READ_MARKER} %s %s\\n' \"$n\" \"$h\"",
        f'if [ "$n" != - ]; then tail -c +{offset + 1} "$f" | head -c {max_bytes}; fi',
    ]
    return "; ".join(parts)


@dataclass(frozen=True)
class ParsedRead:
    """The decoded answer of one read_command."""

    data: str
    consumed: int
    size: int | None
    sidecar: str | None


def incomplete_utf8_tail(data: bytes) -> int:
    """How many trailing bytes start a UTF-8 character that the read cut in half (0..3).

    Those bytes are left for the next read instead of being turned into a replacement
    character; bytes that can never become valid UTF-8 are not held back.
    """
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # continuation byte: keep looking for the lead
            continue
        if byte >= 0xF0 and byte <= 0xF7:
            need = 4
        elif byte >= 0xE0:
            need = 3 if byte <= 0xEF else 0
        elif byte >= 0xC2:
            need = 2
        else:
            need = 0
        return back if need > back else 0
    return 0


def parse_read_raw(stdout: bytes) -> tuple[bytes, int | None, str | None]:
    """A read_command answer as raw payload bytes, the file's size and the sidecar's text;
    ValueError if the header is wrong."""
    header, sep, payload = stdout.partition(b"\n")
    fields = header.decode("ascii", errors="replace").split(" ")
    if not sep or len(fields) != 3 or fields[0] != READ_MARKER:
        raise ValueError(f"unexpected answer to the read command: {header[:120]!r}")
    size_field, sidecar_field = fields[1], fields[2]
    try:
        size = None if size_field == "-" else int(size_field)
        sidecar = None if sidecar_field == "-" else bytes.fromhex(sidecar_field).decode(
            "utf-8", errors="replace")
    except ValueError as exc:
        raise ValueError(f"unexpected header from the read command: {header[:120]!r}") from exc
    return payload, size, sidecar


def parse_read_output(stdout: bytes) -> ParsedRead:
    """Split a read_command answer into header and payload; ValueError if the header is wrong."""
    payload, size, sidecar = parse_read_raw(stdout)
    keep = len(payload) - incomplete_utf8_tail(payload)
    return ParsedRead(payload[:keep].decode("utf-8", errors="replace"), keep, size, sidecar)
