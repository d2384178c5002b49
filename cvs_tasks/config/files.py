"""Reading the JSON files users write, through the one bounded reader (`cvs_tasks.inputs`): a
missing file names the path tried, bad JSON names line and column, every limit is an exit-2 error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cvs_tasks.config.errors import ConfigError
from cvs_tasks.inputs import InputRefused, load_json


def read_json_object(path: Path | str, what: str = "config") -> tuple[dict[str, Any], bytes]:
    """Return the parsed top-level object and the raw bytes (for hashing), or raise ConfigError."""
    path = Path(path)
    try:
        obj, data = load_json(path, what)
    except InputRefused as exc:
        raise ConfigError(path, [(exc.where, exc.message)]) from None
    if not isinstance(obj, dict):
        raise ConfigError(path, [("", f"the top level must be a JSON object {{...}}, not {type(obj).__name__}")])
    return obj, data
