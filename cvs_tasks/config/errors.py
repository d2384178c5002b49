"""From a file a user wrote to a validated model, or one ConfigError naming every problem.

Every problem is rendered as `<file>: <dotted path>: <message>`, and problems are collected, never
raised one by one, so a user fixes a file in one pass. The files are read through the one bounded
reader (`cvs_tasks.inputs`): a missing file names the path tried, bad syntax names line and
column, every limit is an exit-2 error; a `.toml` file is TOML (stdlib `tomllib`), anything else
JSON, and both give the same plain dict to the same models, so every later message is the same
dotted path. pydantic's own messages are kept where they are clear; a few are rewritten so they
say what to do (unknown keys get a did-you-mean, `"3"` vs `3` gets a quoting hint).
"""

from __future__ import annotations

import difflib
import json
import re
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, Field, ValidationError
from pydantic_core import PydanticCustomError

from cvs_tasks.errors import BadInput
from cvs_tasks.inputs import InputRefused, load_json, load_toml

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


# --- validating: pydantic's errors as problems -------------------------------------------------
M = TypeVar("M", bound=BaseModel)

KEY_HINTS = {
    "gpu_arch": "renamed to gpu_name (MI300X, MI325X or MI355X)",
    "nnodes": "not a config field: the suite sets NNODES from the number of hosts in the cluster file",
    "NNODES": "not a config field: the suite sets NNODES from the number of hosts in the cluster file",
    "thresholds": "thresholds live in their own file; point threshold_json at it",
    "env": "container environment goes in container.env",
}


def validate_model(model: type[M], data: Any, prefix: str = "") -> tuple[M | None, list[Problem]]:
    """Validate `data`; on failure return every error as (dotted path, actionable message)."""
    try:
        return model.model_validate(data), []
    except ValidationError as exc:
        return None, [_problem(model, err, prefix) for err in exc.errors(include_url=False)]


def _problem(model: type[BaseModel], err: dict[str, Any], prefix: str) -> Problem:
    loc: Sequence[str | int] = tuple(err["loc"])
    path = loc_to_path(loc, prefix)
    kind = err["type"]
    if kind == "extra_forbidden":
        key = str(loc[-1]) if loc else ""
        return path, _unknown_key_message(key, _fields_at(model, loc[:-1]), at_top=len(loc) == 1)
    if kind == "missing":
        return path, "required key is missing"
    if kind == "string_type":
        return path, f"must be a string (write \"{_plain(err.get('input'))}\" with quotes)"
    if kind in ("value_error", "assertion_error"):
        message = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        return path, message
    return path, f"{err['msg']} (got {_plain(err.get('input'))})" if "input" in err else err["msg"]


def _unknown_key_message(key: str, allowed: list[str], *, at_top: bool) -> str:
    if key.startswith("_") and not at_top:
        return "comment keys ('_...') are only allowed at the top level of the file; move or delete it"
    if key in KEY_HINTS:
        return f"unknown key: {KEY_HINTS[key]}"
    hint = did_you_mean(key, allowed)
    listing = f"; allowed: {', '.join(allowed)}" if not hint and allowed else ""
    return f"unknown key{hint}{listing}"


def _plain(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _fields_at(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """Names of the fields of the model reached by following `loc` from `model` ([] if not a model)."""
    current: Any = model
    for key in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(key))
            if field is None:
                return []
            current = field.annotation
            continue
        origin = typing.get_origin(current)
        args = typing.get_args(current)
        if origin in (list, tuple, set) and args:
            current = args[0]
        elif origin is dict and len(args) == 2:
            current = args[1]
        else:
            return []
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _unwrap(annotation: Any) -> Any:
    """`X | None` and `Annotated[X, ...]` -> X."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return _unwrap(members[0])
    return annotation


def one_of(allowed: Callable[[], Sequence[str]]) -> Any:
    """A str field type whose value must be one of ``allowed()``, a registry that may grow
    (runtimes): checked when validating, refused with pydantic's own Literal message ("Input
    should be 'a', 'b' or 'c'"), and listed as the schema's enum."""

    def check(value: Any) -> Any:
        names = tuple(allowed())
        if not isinstance(value, str) or value not in names:
            quoted = [repr(n) for n in names]
            expected = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
            raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})
        return value

    def schema(json_schema: dict[str, Any]) -> None:
        json_schema["enum"] = list(allowed())

    return Annotated[str, BeforeValidator(check), Field(json_schema_extra=schema)]


# --- reading: a JSON or TOML file as a plain dict ----------------------------------------------
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
