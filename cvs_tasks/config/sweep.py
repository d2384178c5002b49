"""Sweep combos: the `MBS=<m>,GBS=<g>,PRECISION=<p>` key grammar, `runs`, the implicit `default`
combo and the overlay merge that gives each combo its effective train params. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from cvs_tasks.config.errors import Problem, did_you_mean, join_path, short_repr
from cvs_tasks.config.placeholders import CHANGEME
from cvs_tasks.identifiers import identifier_problem, is_ascii_positive_int
from cvs_tasks.run.records import combo_dir

DEFAULT_COMBO = "default"
KEY_PATTERN = re.compile(r"\AMBS=([^,]+),GBS=([^,]+),PRECISION=([^,]+)\Z")
KNOWN_PRECISIONS = ("FP8", "BF16", "FP16", "MXFP8", "MXFP4")
"""Every precision some launcher knows (cvs_tasks/families.py); anything else would silently train FP8."""
FORCED = ("micro_batch_size", "global_batch_size", "precision")
TRAIN_PARAM_DEFAULTS = {
    "tokenizer_model": "meta-llama/Llama-3.1-70B",
    "model_size": "70",
    "sequence_length": "8192",
    "tensor_parallelism": "1",
    "pipeline_parallelism": "1",
    "fsdp": "0",
    "recompute": "0",
    "training_iterations": "10",
}
"""What the jobs assume when train_params leaves a key out (docs/reference_suite.md#config-defaults)."""
WHOLE_NUMBER_PARAMS = ("sequence_length", "tensor_parallelism", "pipeline_parallelism", "fsdp", "recompute")
"""train_params that reach a launcher as numbers: `"٤"` or `"²"` would pass `isdigit()` and break it."""
ASCII_WHOLE = re.compile(r"\A[0-9]{1,18}\Z")


@dataclass(frozen=True)
class Combo:
    """One sweep cell to train: its id (the sweep key or `default`) and effective parameters."""

    id: str
    cell: str
    mbs: str
    gbs: str
    precision: str
    train_params: dict[str, str] = field(hash=False, compare=True)


def combo_key(mbs: str, gbs: str, precision: str) -> str:
    return f"MBS={mbs},GBS={gbs},PRECISION={precision}"


def parse_combo_key(key: str) -> tuple[str, str, str] | None:
    """(mbs, gbs, precision) from `MBS=4,GBS=128,PRECISION=FP8`, or None if the key is malformed
    (including any character outside the sweep-key grammar: a newline, a slash, `..`)."""
    if identifier_problem("sweep key", key) is not None:
        return None
    match = KEY_PATTERN.match(key)
    return (match.group(1), match.group(2), match.group(3)) if match else None


def build_combos(sweep: Any, train_params: Any) -> tuple[list[Combo], list[Problem]]:
    """The combos to run, in `sweep.runs` order, with every sweep problem found along the way.

    Works on the raw (placeholder-resolved) JSON so sweep problems are reported even when other
    blocks fail validation.
    """
    problems: list[Problem] = []
    base, base_problems = _text_params(train_params, "train_params")
    problems += base_problems
    if isinstance(train_params, dict) and not str(train_params.get("model_name", "")).strip():
        problems.append(("train_params.model_name", "required: names the model in logs, reports and Primus YAML"))
    sweep = sweep if isinstance(sweep, dict) else {}
    combinations = sweep.get("combinations") if isinstance(sweep.get("combinations"), dict) else {}
    runs = sweep.get("runs")

    if not combinations:
        if isinstance(runs, list) and [r for r in runs if r != DEFAULT_COMBO]:
            problems.append(("sweep.runs", "lists combos but sweep.combinations is empty; declare them there"))
        combo, default_problems = _default_combo({}, base, "train_params", implicit=True)
        return ([combo] if combo else []), problems + default_problems

    if runs is None:
        runs = list(combinations)
    elif not isinstance(runs, list):
        return [], problems  # the model check reports the type
    elif not runs:
        problems.append(("sweep.runs", "is empty; list the combination keys to run, e.g. "
                         f"[{', '.join(repr(k) for k in list(combinations)[:2])}]"))

    problems += folder_collisions(list(combinations))
    built: dict[str, Combo] = {}
    for key, body in combinations.items():
        combo, combo_problems = _combo(key, body, base)
        problems += combo_problems
        if combo:
            built[key] = combo

    combos: list[Combo] = []
    seen: dict[str, int] = {}
    for index, key in enumerate(runs):
        where = join_path("sweep.runs", index)
        if not isinstance(key, str):
            continue  # the model check reports the type
        if key in seen:
            problems.append((where, f"{key!r} repeats sweep.runs[{seen[key]}]; each combo runs once"))
            continue
        seen[key] = index
        if key not in combinations:
            known = ", ".join(combinations)
            problems.append((where, f"{key!r} is not in sweep.combinations{did_you_mean(key, combinations)} "
                                    f"(known: {known})"))
        elif key in built:
            combos.append(built[key])
    return combos, problems


def _combo(key: str, body: Any, base: dict[str, str]) -> tuple[Combo | None, list[Problem]]:
    where = join_path("sweep.combinations", key)
    if not isinstance(body, dict):
        return None, [(where, 'must be an object of train_params overlays, e.g. {"training_iterations": "20"}')]
    if key == DEFAULT_COMBO:
        return _default_combo(body, base, where, implicit=False)
    bad_name = identifier_problem("sweep key", key)
    if bad_name is not None:
        return None, [(where, f"invalid combination key: {bad_name}")]
    parsed = parse_combo_key(key)
    if parsed is None:
        return None, [(where, "invalid combination key; write MBS=<micro batch>,GBS=<global batch>,"
                       "PRECISION=<precision>, e.g. MBS=4,GBS=128,PRECISION=FP8")]
    problems = [(where, f"{name} in the key must be a positive integer in ASCII digits 0-9 (got {value!r})")
                for name, value in (("MBS", parsed[0]), ("GBS", parsed[1])) if not _positive_int(value)]
    precision_problem = precision_problem_of(parsed[2])
    if precision_problem:
        problems.append((where, precision_problem))
    overlay, overlay_problems = _overlay(body, where)
    problems += overlay_problems
    for name, value in zip(FORCED, parsed):
        if name in overlay and overlay[name] != value:
            problems.append((join_path(where, name), f"is {overlay[name]!r} but the key sets {value!r}; "
                             "the key defines micro_batch_size, global_batch_size and precision, drop it here"))
    if problems:
        return None, problems
    return _assemble(key, key, parsed, base, overlay, where)


def _default_combo(body: dict[str, Any], base: dict[str, str], where: str,
                   *, implicit: bool) -> tuple[Combo | None, list[Problem]]:
    overlay, problems = _overlay(body, where) if body else ({}, [])
    merged = {**base, **overlay}
    for name in FORCED:
        if not merged.get(name, "").strip():
            why = ("without sweep.combinations the suite runs one implicit 'default' combo, which takes "
                   "micro_batch_size, global_batch_size and precision from train_params; set it here or "
                   "declare sweep.combinations") if implicit else "the 'default' combo needs it"
            problems.append((join_path("train_params", name), f"required: {why}"))
    if problems:
        return None, problems
    parsed = (merged["micro_batch_size"], merged["global_batch_size"], merged["precision"])
    for name, value in zip(FORCED[:2], parsed[:2]):
        if CHANGEME not in value and not _positive_int(value):
            problems.append((_source(where, overlay, name),
                             f"must be a positive integer in ASCII digits 0-9 (got {value!r})"))
    if CHANGEME not in parsed[2] and precision_problem_of(parsed[2]):
        problems.append((_source(where, overlay, "precision"), precision_problem_of(parsed[2])))
    if problems:
        return None, problems
    return _assemble(DEFAULT_COMBO, DEFAULT_COMBO, parsed, base, overlay, where)


def _assemble(combo_id: str, cell: str, parsed: tuple[str, str, str], base: dict[str, str],
              overlay: dict[str, str], where: str) -> tuple[Combo | None, list[Problem]]:
    """Effective params: train_params, then the combo's overlays, then the key's three values, then defaults."""
    params = {**base, **overlay, **dict(zip(FORCED, parsed))}
    for name, value in TRAIN_PARAM_DEFAULTS.items():
        params.setdefault(name, value)
    for name in WHOLE_NUMBER_PARAMS:
        value = params.get(name, "")
        if value.strip() and CHANGEME not in value and not ASCII_WHOLE.match(value.strip()):
            source = join_path(where, name) if name in overlay else join_path("train_params", name)
            return None, [(source, f"must be a whole number in ASCII digits 0-9 (got {value!r})")]
    for name, kind in (("model_name", "model name"), ("tokenizer_model", "tokenizer")):
        value = params.get(name, "")
        problem = identifier_problem(kind, value.strip()) if value.strip() and CHANGEME not in value else None
        if problem:  # both reach node paths and command words (a leading '-' would be an option)
            return None, [(join_path(where, name) if name in overlay else join_path("train_params", name), problem)]
    iterations = params["training_iterations"]
    if CHANGEME not in iterations and not _positive_int(iterations):
        source = (join_path(where, "training_iterations") if "training_iterations" in overlay
                  else "train_params.training_iterations")
        return None, [(source, f"must be a positive whole number of steps (got {iterations!r})")]
    mbs, gbs, precision = parsed
    return Combo(combo_id, cell, mbs, gbs, precision, params), []


def _overlay(body: dict[str, Any], where: str) -> tuple[dict[str, str], list[Problem]]:
    body = {k: v for k, v in body.items() if k != "name"}
    problems: list[Problem] = []
    if "model_name" in body:
        problems.append((join_path(where, "model_name"), "cannot change per combo; set it once in train_params"))
        body.pop("model_name")
    overlay, text_problems = _text_params(body, where)
    return overlay, problems + text_problems


def _text_params(params: Any, where: str) -> tuple[dict[str, str], list[Problem]]:
    """Train params as strings (numbers are accepted and written as text); other types are problems."""
    if not isinstance(params, dict):
        return {}, []
    text: dict[str, str] = {}
    problems: list[Problem] = []
    for key, value in params.items():
        if isinstance(value, str):
            text[key] = value
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            text[key] = str(value)
        else:
            problems.append((join_path(where, key), f"must be a string or a number (got {short_repr(value)})"))
    return text, problems


def _positive_int(text: str) -> bool:
    return is_ascii_positive_int(text)


def _source(where: str, overlay: dict[str, str], name: str) -> str:
    return join_path(where, name) if name in overlay else join_path("train_params", name)


def precision_problem_of(precision: str) -> str | None:
    """None for a precision some launcher knows (any case, `TE_` prefix allowed), else the problem."""
    if precision.strip().upper().removeprefix("TE_") in KNOWN_PRECISIONS:
        return None
    return (f"unknown precision {precision!r}: use one of {', '.join(KNOWN_PRECISIONS)} "
            "(an unknown precision would silently train as FP8)")


def folder_collisions(keys: list[str], where: str = "sweep.combinations") -> list[Problem]:
    """Keys whose on-disk folder name (`combo_dir`) is the same, compared case-insensitively:
    they would share a log folder and a stage record, and the second would be skipped as done."""
    seen: dict[str, str] = {}
    problems: list[Problem] = []
    for key in keys:
        folder = combo_dir(key).casefold()
        if folder in seen:
            problems.append((join_path(where, key), f"uses the same folder name as {seen[folder]!r} "
                             f"({combo_dir(key)}); the two would share logs and records, keep one"))
        else:
            seen[folder] = key
    return problems


def cell_coverage(combos: list[Combo], declared: list[str], cells: list[str]) -> tuple[list[Combo], list[str]]:
    """(combos with no threshold cell, threshold cells that match no declared combination).

    `declared` is every key of sweep.combinations (or `default`): a cell for a combo that is
    declared but not selected in `runs` is not a typo, so it is not reported.
    """
    missing = [c for c in combos if c.cell not in cells]
    extra = [cell for cell in cells if cell not in declared]
    return missing, extra
