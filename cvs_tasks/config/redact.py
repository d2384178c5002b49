"""Secret-free copies of configs for the manifest, the report and `config.show`."""

from __future__ import annotations

import copy
import re
from typing import Any

from pydantic import BaseModel

MASK = "***"
_SECRET_WORDS = {"password", "passwd", "pwd", "secret", "token", "apikey", "credential", "credentials", "auth"}
_PATH_SUFFIXES = ("_file", "_path", "_dir", "_files")
_TOKEN_IN_TEXT = re.compile(r"\bhf_[A-Za-z0-9]{20,}\b")


def looks_secret(key: str) -> bool:
    """`HF_TOKEN`, `password`, `api_key`: yes. `hf_token_file`, `tokenizer_model`: no (a path, a model id)."""
    lowered = key.lower()
    if lowered.endswith(_PATH_SUFFIXES):
        return False
    words = [w for w in re.split(r"[_\-.\s]+|(?<=[a-z])(?=[A-Z])", key) if w]
    words = [w.lower() for w in words]
    joined = {a + b for a, b in zip(words, words[1:])}
    return bool(_SECRET_WORDS & (set(words) | joined))


def redact(obj: Any) -> Any:
    """A deep copy with secret values replaced by `***` (pydantic models are dumped to JSON data first)."""
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json")
    return _redact(copy.deepcopy(obj))


def _redact(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {key: (MASK if looks_secret(str(key)) and value not in (None, "") else _redact(value))
                for key, value in obj.items()}
    if isinstance(obj, list):
        return [_redact(value) for value in obj]
    if isinstance(obj, tuple):
        return tuple(_redact(value) for value in obj)
    if isinstance(obj, str):
        return _TOKEN_IN_TEXT.sub(MASK, obj)
    return obj
