"""Keep secret values (HF token, registry password) out of everything the harness writes.

The lifecycle registers each secret it reads; every text that reaches the console, a stage log,
a record or a pulled-back node log goes through ``Redactor.__call__`` first.
"""

from __future__ import annotations

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
