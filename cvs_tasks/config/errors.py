"""ConfigError and the helpers that turn every problem into `<file>: <dotted path>: <message>`.

Problems are collected, never raised one by one, so a user fixes a file in one pass.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from cvs_tasks.errors import BadInput

Problem = tuple[str, str]
"""(dotted path such as `sweep.runs[2]` or `container.env.NCCL_DEBUG`, message)."""

_PLAIN_KEY = re.compile(r"\A[A-Za-z0-9_-]+\Z")


class ConfigError(BadInput):
    """Every problem found in one or more user files, rendered as one screen of text.

    `.file` is the first file with problems, `.problems` every (path, message) pair across all
    files, and `.groups` keeps them per file (a suite load can fail in both the config and its
    threshold file at once).
    """

    def __init__(
        self,
        file: Path | str | None,
        problems: Sequence[Problem],
        *,
        also: Sequence[tuple[Path | str | None, Sequence[Problem]]] = (),
    ) -> None:
        pairs = [(file, list(problems))] + [(f, list(p)) for f, p in also]
        groups = [(Path(f) if f is not None else None, p) for f, p in pairs if p]
        if not groups:
            groups = [(Path(file) if file is not None else None, [])]
        self.groups: list[tuple[Path | None, list[Problem]]] = groups
        self.file: Path | None = groups[0][0] if groups else None
        self.problems: list[Problem] = [p for _, ps in groups for p in ps]
        super().__init__(self.render())

    def render(self) -> str:
        """`config error in <file>:` then one `  <path>: <message>` line per problem, per file."""
        lines: list[str] = []
        for file, problems in self.groups:
            lines.append(f"config error in {file if file is not None else '<no file>'}:")
            for path, message in problems:
                lines.append(f"  {path}: {message}" if path else f"  {message}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


def join_path(prefix: str, key: str | int) -> str:
    """Extend a dotted path: `a` + `b` -> `a.b`, + 2 -> `a[2]`, + `MBS=4,...` -> `a["MBS=4,..."]`."""
    if isinstance(key, int):
        return f"{prefix}[{key}]"
    part = key if _PLAIN_KEY.match(key) else f"[{json.dumps(key)}]"
    if not prefix:
        return part
    return prefix + part if part.startswith("[") else f"{prefix}.{part}"


def loc_to_path(loc: Iterable[str | int], prefix: str = "") -> str:
    """A pydantic error location tuple as a dotted path."""
    path = prefix
    for key in loc:
        path = join_path(path, key)
    return path


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest choice, or '' when nothing is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    if not close:
        lowered = {c.lower(): c for c in choices}
        close = [lowered[word.lower()]] if word.lower() in lowered else []
    return f" (did you mean {close[0]!r}?)" if close else ""


def short_repr(value: Any, limit: int = 60) -> str:
    """A value as it would appear in the user's JSON, cut to fit on one line."""
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_under(path: str, roots: set[str]) -> bool:
    """True when `path` is one of `roots` or inside one of them (`a.b` is under `a`, `a[0]` too)."""
    return any(path == r or path.startswith(r + ".") or path.startswith(r + "[") for r in roots)
