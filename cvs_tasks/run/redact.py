"""Keep secret values (HF token, registry password) out of everything the harness writes.

The lifecycle registers each secret it reads; every text that reaches the console, a stage log,
a record or a pulled-back node log goes through ``Redactor.__call__`` first.
"""

from __future__ import annotations

from typing import BinaryIO

MASK = "***"


class Redactor:
    def __init__(self) -> None:
        self._secrets: set[str] = set()

    def add(self, secret: str | None) -> None:
        secret = (secret or "").strip()
        if len(secret) >= 4:  # a 1-3 char "secret" would mask ordinary text
            self._secrets.add(secret)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def __bool__(self) -> bool:
        return bool(self._secrets)


class RedactingWriter:
    """A node-log copy with every secret masked, written to a binary file as the log arrives.

    Reads are cut anywhere, so a token could arrive in two pieces: the text after the last newline
    is held back until its line is complete (or it grows past ``hold`` characters, when all but
    the last ``keep`` characters go out). Without secrets everything is written at once.
    """

    def __init__(self, fh: BinaryIO, redact: Redactor, *, hold: int = 64 * 1024, keep: int = 4096) -> None:
        self._fh, self._redact, self._hold, self._keep = fh, redact, hold, keep
        self._pending = ""

    def write(self, text: str) -> None:
        if not self._redact:
            self._fh.write(text.encode("utf-8", "replace"))
            return
        buf = self._pending + text
        cut = buf.rfind("\n") + 1
        if cut == 0 and len(buf) > self._hold:
            cut = len(buf) - self._keep
        self._pending = buf[cut:]
        if cut:
            self._fh.write(self._redact(buf[:cut]).encode("utf-8", "replace"))

    def flush(self) -> None:
        self._fh.flush()

    def close(self) -> None:
        if self._pending:
            self._fh.write(self._redact(self._pending).encode("utf-8", "replace"))
            self._pending = ""
        self._fh.close()
