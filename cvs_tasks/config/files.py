"""Reading the JSON or TOML files users write, through the one bounded reader (`cvs_tasks.inputs`):
a missing file names the path tried, bad syntax names line and column, every limit is an exit-2
error. A `.toml` file is TOML (stdlib `tomllib`), anything else JSON; both give the same plain
dict to the same models, so every later message is the same dotted path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cvs_tasks.config.errors import ConfigError
from cvs_tasks.inputs import InputRefused, load_json, load_toml

SUFFIXES = (".json", ".toml")
"""The formats a suite, threshold or cluster file may be written in."""


def is_toml(path: Path | str) -> bool:
    return Path(path).suffix.lower() == ".toml"


def read_object(path: Path | str, what: str = "config") -> tuple[dict[str, Any], bytes]:
    """Return the parsed top-level object and the raw bytes (for hashing), or raise ConfigError."""
    path = Path(path)
    try:
        obj, data = load_toml(path, what) if is_toml(path) else load_json(path, what)
    except InputRefused as exc:
        raise ConfigError(path, [(exc.where, exc.message)]) from None
    if not isinstance(obj, dict):
        raise ConfigError(path, [("", f"the top level must be a JSON object {{...}}, not {type(obj).__name__}")])
    return obj, data
