"""Run a pydantic model over user data and return (model or None, problems as dotted paths).

pydantic's own messages are kept where they are clear; a few are rewritten so they say what to do
(unknown keys get a did-you-mean, `"3"` vs `3` gets a quoting hint).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, Field, ValidationError
from pydantic_core import PydanticCustomError

from cvs_tasks.config.errors import Problem, did_you_mean, loc_to_path

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
