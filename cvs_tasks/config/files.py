"""Reading the JSON files users write: a missing file names the path tried, bad JSON names line and column."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cvs_tasks.config.errors import ConfigError


def read_json_object(path: Path | str, what: str = "config") -> tuple[dict[str, Any], bytes]:
    """Return the parsed top-level object and the raw bytes (for hashing), or raise ConfigError."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(path, [("", f"{what} file not found (tried {path.resolve()})")]) from None
    except IsADirectoryError:
        raise ConfigError(path, [("", f"{what} file is a directory, not a JSON file: {path}")]) from None
    except OSError as exc:
        raise ConfigError(path, [("", f"cannot read {what} file: {exc.strerror or exc}")]) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(path, [("", f"not UTF-8 text (byte {exc.start}); save the file as UTF-8")]) from None
    duplicates: list[str] = []
    try:
        obj = json.loads(text, object_pairs_hook=lambda pairs: _no_duplicates(pairs, duplicates))
    except json.JSONDecodeError as exc:
        raise ConfigError(path, [(f"line {exc.lineno} column {exc.colno}", f"invalid JSON: {exc.msg}")]) from None
    if duplicates:
        raise ConfigError(path, [
            ("", f"key {key!r} appears twice in one object; JSON would silently keep only the last, remove one")
            for key in dict.fromkeys(duplicates)
        ])
    if not isinstance(obj, dict):
        raise ConfigError(path, [("", f"the top level must be a JSON object {{...}}, not {type(obj).__name__}")])
    return obj, data


def _no_duplicates(pairs: list[tuple[str, Any]], duplicates: list[str]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            duplicates.append(key)
        obj[key] = value
    return obj
