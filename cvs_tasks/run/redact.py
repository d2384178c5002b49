"""Keep secret values (HF token, registry password) out of everything the harness writes.

The lifecycle registers each secret it reads. Two places mask them, at the depth where every
output passes: ``RunDir`` masks every string (and key) of each JSON file and page it writes
(``Redactor.data`` / ``__call__``), and ``RedactingWriter`` masks a node's log stream as its reads
arrive, before the copy is written or any line of it is cut. The console and stage logs get
messages already passed through ``__call__``.
"""

from __future__ import annotations

import re
from typing import Any, BinaryIO

MASK = "***"


class Redactor:
    def __init__(self) -> None:
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None

    def add(self, secret: str | None) -> None:
        secret = (secret or "").strip()
        if len(secret) >= 4:  # a 1-3 char "secret" would mask ordinary text
            self._secrets.add(secret)
            self._pattern = None

    @property
    def pattern(self) -> re.Pattern[str] | None:
        """Every secret, longest first (so a secret that contains another is masked whole)."""
        if self._pattern is None and self._secrets:
            ordered = sorted(self._secrets, key=lambda s: (-len(s), s))
            self._pattern = re.compile("|".join(re.escape(s) for s in ordered))
        return self._pattern

    @property
    def secrets(self) -> frozenset[str]:
        return frozenset(self._secrets)

    @property
    def longest(self) -> int:
        return max((len(s) for s in self._secrets), default=0)

    def __call__(self, text: str) -> str:
        pattern = self.pattern
        return pattern.sub(MASK, text) if pattern is not None and isinstance(text, str) else text

    def data(self, obj: Any) -> Any:
        """A copy of JSON-like data with every string value and key masked (tuples become lists)."""
        if not self._secrets:
            return obj
        if isinstance(obj, str):
            return self(obj)
        if isinstance(obj, dict):
            return {self(k) if isinstance(k, str) else k: self.data(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.data(v) for v in obj]
        return obj

    def __bool__(self) -> bool:
        return bool(self._secrets)


def release_point(text: str, redactor: Redactor, *, final: bool = False) -> int:
    """How much of ``text`` can be masked and released now, so that the stream's copy equals the
    whole text masked: all of it, except from the first position where the rest of ``text`` is the
    beginning of a secret (it may end in the next read). Only the last ``longest - 1``
    characters can be such a beginning; a log that ends in a newline is released whole.
    ``final``: all of it."""
    if final or not redactor:
        return len(text)
    pos = 0
    for match in redactor.pattern.finditer(text):  # type: ignore[union-attr] - a redactor with secrets has one
        held = _first_partial(text, pos, match.start() + 1, redactor)
        if held is not None:
            return held
        pos = match.end()
    held = _first_partial(text, pos, len(text), redactor)
    return len(text) if held is None else held


def _first_partial(text: str, lo: int, hi: int, redactor: Redactor) -> int | None:
    """The first position in [lo, hi) where the rest of ``text`` is a secret's beginning, cut short."""
    secrets = redactor.secrets
    for p in range(max(lo, len(text) - (redactor.longest - 1)), hi):
        rest = text[p:]
        if any(len(secret) > len(rest) and secret.startswith(rest) for secret in secrets):
            return p
    return None


class RedactingWriter:
    """A node-log copy with every secret masked, written to a binary file as the log arrives.

    Reads end anywhere, so a secret may arrive in pieces: a read's end that could be the start of a
    secret (at most ``longest secret - 1`` characters) stays unreleased until the next read or the
    close, whatever the line length (a progress bar with no newline is masked the same as a short
    line). Everything else is written as it arrives, so the copy is current for the watch's tail.
    """

    def __init__(self, fh: BinaryIO, redact: Redactor) -> None:
        self._fh, self._redact = fh, redact
        self._pending = ""

    def write(self, text: str) -> None:
        buf = self._pending + text
        cut = release_point(buf, self._redact)
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
