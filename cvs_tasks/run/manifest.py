"""What a run manifest (``run.json``) may hold, checked field by field as it is read back.

The manifest is read by every later command of a run, by ``invoke report`` and by the history;
a hand-edited or tampered one must fail as one line naming the file and the field (exit 2), never
as a traceback deep in a reader. Each known field is declared once here with its kind; a field
that is absent or null reads as "not recorded"; unknown fields are kept and not read.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

from cvs_tasks.errors import BadInput

MAX_TEXT = 4096  # a path, an image name, a host
MAX_ITEMS = 100_000  # hosts, combos, warnings
MAX_TIME = 1e11  # unix seconds (year 5138)


def _text(value: Any) -> str | None:
    if not isinstance(value, str):
        return "a string"
    return f"at most {MAX_TEXT} characters" if len(value) > MAX_TEXT else None


def _texts(value: Any) -> str | None:
    if not isinstance(value, list) or len(value) > MAX_ITEMS:
        return f"a list of at most {MAX_ITEMS} strings"
    bad = next((i for i, item in enumerate(value) if _text(item)), None)
    return None if bad is None else f"a list of strings of at most {MAX_TEXT} characters (item {bad} is not)"


def _time(value: Any) -> str | None:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return None if number and math.isfinite(value) and 0 <= value < MAX_TIME else "a time in unix seconds"


def _count(value: Any) -> str | None:
    return None if type(value) is int and 0 <= value < 2**31 else "a whole number"


def _flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else "true or false"


def _object(value: Any) -> str | None:
    return None if isinstance(value, dict) else "a JSON object"


FIELDS: dict[str, Callable[[Any], str | None]] = {
    "run_id": _text, "tool_version": _text, "created": _time, "finished": _time, "interrupted": _flag,
    "config_file": _text, "cluster_file": _text, "threshold_file": _text, "files_hash": _text,
    "suite_flag": _text, "warnings": _texts, "suite": _text, "backend": _text, "image": _text,
    "image_digest": _text, "runtime": _text, "gpu_name": _text, "gpus_per_node": _count, "hosts": _texts,
    "model_name": _text, "enforce_thresholds": _flag, "combos": _texts, "effective_config": _object,
    "scope": _text, "slurm": _object,
}


def manifest_problems(data: Any) -> list[str]:
    """``field: should be ...`` for every known field of the wrong kind ([] when it reads well)."""
    if not isinstance(data, dict):
        return ["the top level is not a JSON object"]
    problems = []
    for name, check in FIELDS.items():
        value = data.get(name)
        why = check(value) if value is not None else None
        if why:
            problems.append(f"{name}: should be {why}, not {_shown(value)}")
    return problems


def check_manifest(data: Any, path: Path) -> dict[str, Any]:
    """``data`` when every known field reads well; else BadInput naming the file and each field."""
    problems = manifest_problems(data)
    if problems:
        raise BadInput(f"unreadable manifest {path}: " + "; ".join(problems[:5])
                       + " (a hand-edited run.json? restore it, or start a new run)")
    return data


def _shown(value: Any) -> str:
    kind = type(value).__name__
    if isinstance(value, (str, list, dict)):
        return f"a {kind} of {len(value)} {'characters' if isinstance(value, str) else 'items'}"
    text = repr(value)
    return f"{kind} {text[:40]}{'...' if len(text) > 40 else ''}"
