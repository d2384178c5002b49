"""`{user-id}` / `{paths.*}` substitution, top-level `_comment` keys and the `<changeme>` scan.

All functions are pure over plain JSON data (dicts, lists, scalars) and return new data.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from cvs_tasks.config.errors import Problem, join_path

CHANGEME = "<changeme>"
USER_ID = "{user-id}"
_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_.-]+)\}")


def local_user(env: Mapping[str, str] | None = None) -> str:
    """The OS user the harness runs as: $USER, then $LOGNAME, then $USERNAME, else root."""
    env = os.environ if env is None else env
    for name in ("USER", "LOGNAME", "USERNAME"):
        if env.get(name):
            return env[name]
    return "root"


def map_strings(data: Any, fn: Callable[[str], str]) -> Any:
    """A copy of `data` with `fn` applied to every string value (keys are left alone)."""
    if isinstance(data, str):
        return fn(data)
    if isinstance(data, dict):
        return {key: map_strings(value, fn) for key, value in data.items()}
    if isinstance(data, list):
        return [map_strings(value, fn) for value in data]
    return data


def strip_comments(data: dict[str, Any]) -> dict[str, Any]:
    """Drop top-level keys starting with `_` (inline comments). Nested ones stay, and fail validation."""
    return {key: value for key, value in data.items() if not key.startswith("_")}


def substitute_user(data: Any, user: str) -> Any:
    return map_strings(data, lambda s: s.replace(USER_ID, user))


CVS_ROOT = "{cvs-root}"


def substitute_cvs_root(data: Any, root: str) -> Any:
    """`{cvs-root}`: the checkout of this tool, so the testbed and demo configs can point at the
    simulated trainer that ships in the repo without a site-specific absolute path."""
    return map_strings(data, lambda s: s.replace(CVS_ROOT, root))


NO_CHECKOUT = ("{cvs-root} means the cvs-tasks checkout (where the testbed's simulated trainer lives), and this "
               "install has none (installed from a wheel): run from a checkout (git clone, then pip install -e .) "
               "or write a real path here")


def cvs_root_problems(data: Any) -> list[Problem]:
    """Every place `{cvs-root}` is used, for an install that has no checkout to put there."""
    return [(where, NO_CHECKOUT) for where, text in iter_strings(data) if CVS_ROOT in text]


RUN_ID = "{run-id}"
RUN_ID_FIELDS = ("paths.log_dir", "checkpoint.checkpoint_dir")
"""Where `{run-id}` is filled (by the run, once its id exists): per-run log and checkpoint folders on
the nodes, so runs sharing nodes or a machine never write the same files."""


def fill_run_id(text: str, run_id: str) -> str:
    return text.replace(RUN_ID, run_id)


def run_id_problems(config: Any) -> list[Problem]:
    """`{run-id}` anywhere but RUN_ID_FIELDS would stay unfilled: refuse it there."""
    fields = ", ".join(RUN_ID_FIELDS)
    return [(where, f"{RUN_ID} is only filled in {fields} (put the per-run folder there and refer to it)")
            for where, text in iter_strings(config) if RUN_ID in text and where not in RUN_ID_FIELDS]


MAX_EXPANDED = 4096
"""Longest string a placeholder may expand to: a chain of `{a}` -> `{b}{b}` -> ... doubles per
level, so without a bound 28 levels take hundreds of MB."""


class ExpansionTooLong(ValueError):
    """A placeholder expands past MAX_EXPANDED characters; `.where` is the dotted path."""

    def __init__(self, where: str) -> None:
        super().__init__(f"placeholders expand past {MAX_EXPANDED} characters (a chain of "
                         "{paths.*} references that repeat each other?); shorten it")
        self.where = where


def substitute_paths(config: dict[str, Any]) -> dict[str, Any]:
    """Resolve `{key}` inside `paths` (to a fixed point), then `{paths.key}` everywhere.

    Raises ExpansionTooLong when any string would grow past MAX_EXPANDED characters."""
    config = dict(config)
    paths = config.get("paths")
    if not isinstance(paths, dict):
        return config
    paths = copy.deepcopy(paths)
    flat = {k: v for k, v in paths.items() if isinstance(v, str)}
    for _ in range(len(flat) + 1):
        resolved = {k: _fill(v, flat, join_path("paths", k)) for k, v in flat.items()}
        if resolved == flat:
            break
        flat = resolved
    paths.update(flat)
    config["paths"] = paths
    dotted = {f"paths.{k}": v for k, v in flat.items()}
    return _map_with_path(config, dotted, "")


def _map_with_path(data: Any, values: Mapping[str, str], where: str) -> Any:
    if isinstance(data, str):
        return _fill(data, values, where)
    if isinstance(data, dict):
        return {key: _map_with_path(value, values, join_path(where, str(key))) for key, value in data.items()}
    if isinstance(data, list):
        return [_map_with_path(value, values, join_path(where, i)) for i, value in enumerate(data)]
    return data


def _fill(text: str, values: Mapping[str, str], where: str = "") -> str:
    """One substitution pass, refusing to build a string longer than MAX_EXPANDED."""
    if "{" not in text:
        return text
    grown = len(text)
    limit = max(MAX_EXPANDED, len(text))

    def one(match: re.Match[str]) -> str:
        nonlocal grown
        value = values.get(match.group(1), match.group(0))
        grown += len(value) - len(match.group(0))
        if grown > limit:
            raise ExpansionTooLong(where)
        return value

    return _PLACEHOLDER.sub(one, text)


def unknown_path_placeholders(config: Any, known: set[str], path: str = "") -> list[Problem]:
    """`{paths.x}` left over after substitution: x is not a key of `paths` (a typo)."""
    problems: list[Problem] = []
    for where, text in iter_strings(config, path):
        for name in _PLACEHOLDER.findall(text):
            if name.startswith("paths.") and name[6:] not in known:
                choices = ", ".join(sorted(known)) or "nothing"
                problems.append((where, f"unknown placeholder {{{name}}} (paths has: {choices})"))
    return problems


def exempt_checkpoint(config: dict[str, Any]) -> dict[str, Any]:
    """With the checkpoint stage off, its shared-volume and directory placeholders need no filling."""
    checkpoint = config.get("checkpoint")
    if isinstance(checkpoint, dict) and checkpoint.get("enforce") is True:
        return config
    config = copy.deepcopy(config)
    if isinstance(checkpoint, dict):
        config["checkpoint"].pop("checkpoint_dir", None)
    args = (config.get("container") or {}).get("runtime", {}) if isinstance(config.get("container"), dict) else {}
    args = args.get("args") if isinstance(args, dict) else None
    if isinstance(args, dict) and isinstance(args.get("volumes"), list):
        args["volumes"] = [v for v in args["volumes"] if not (isinstance(v, str) and CHANGEME in v)]
    return config


def iter_strings(data: Any, path: str = ""):
    """(dotted path, string) for every string value, in file order."""
    if isinstance(data, str):
        yield path, data
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from iter_strings(value, join_path(path, str(key)))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from iter_strings(value, join_path(path, index))


def find_changeme(data: Any, path: str = "", *, keys_too: bool = False) -> list[tuple[str, str]]:
    """(dotted path, text) of every string (and, if asked, every key) still containing `<changeme>`."""
    found: list[tuple[str, str]] = []
    if isinstance(data, str):
        if CHANGEME in data:
            found.append((path, data))
    elif isinstance(data, dict):
        for key, value in data.items():
            where = join_path(path, str(key))
            if keys_too and CHANGEME in str(key):
                found.append((where, str(key)))
                continue
            found.extend(find_changeme(value, where, keys_too=keys_too))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found.extend(find_changeme(value, join_path(path, index), keys_too=keys_too))
    return found


def changeme_hint(path: str, value: str) -> str:
    """What to put where a template says `<changeme>`."""
    example = value.replace(CHANGEME, "").strip()
    if path == "gpu_name":
        return "set MI300X or MI325X (mi3xx templates are shared by both)"
    if path == "container.image":
        return "set the ROCm Megatron-LM or Primus image to run"
    if path == "train_params.training_iterations":
        return 'set the step count, e.g. "20" (sweep overlays may override it per combo)'
    if path.startswith("container.runtime.args.volumes"):
        return 'set the shared checkpoint mount "host:container", or turn checkpoint.enforce off'
    if path == "checkpoint.checkpoint_dir":
        return "set a directory on shared storage reachable from every node"
    if example:
        return f"keep or edit the example {example!r} and delete '<changeme>'"
    return "replace '<changeme>' with this site's value"
