"""Sweep combos: the `MBS=<m>,GBS=<g>,PRECISION=<p>` key grammar, `runs`, the implicit `default`
combo and the overlay merge that gives each combo its effective train params. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from cvs_tasks.config.errors import Problem, did_you_mean, join_path, short_repr
from cvs_tasks.config.placeholders import CHANGEME

DEFAULT_COMBO = "default"
KEY_PATTERN = re.compile(r"^MBS=([^,]+),GBS=([^,]+),PRECISION=([^,]+)$")
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
"""What the jobs assume when train_params leaves a key out (behaviour reference §1.5)."""


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
    """(mbs, gbs, precision) from `MBS=4,GBS=128,PRECISION=FP8`, or None if the key is malformed."""
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
            problems.append((where, f"{key!r} is not in sweep.combinations{did_you_mean(key, combinations)} (known: {known})"))
        elif key in built:
            combos.append(built[key])
    return combos, problems


def _combo(key: str, body: Any, base: dict[str, str]) -> tuple[Combo | None, list[Problem]]:
    where = join_path("sweep.combinations", key)
    if not isinstance(body, dict):
        return None, [(where, 'must be an object of train_params overlays, e.g. {"training_iterations": "20"}')]
    if key == DEFAULT_COMBO:
        return _default_combo(body, base, where, implicit=False)
    parsed = parse_combo_key(key)
    if parsed is None:
        return None, [(where, "invalid combination key; write MBS=<micro batch>,GBS=<global batch>,"
                       "PRECISION=<precision>, e.g. MBS=4,GBS=128,PRECISION=FP8")]
    problems = [(where, f"{name} in the key must be a positive integer (got {value!r})")
                for name, value in (("MBS", parsed[0]), ("GBS", parsed[1])) if not _positive_int(value)]
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
    return _assemble(DEFAULT_COMBO, DEFAULT_COMBO, parsed, base, overlay, where)


def _assemble(combo_id: str, cell: str, parsed: tuple[str, str, str], base: dict[str, str],
              overlay: dict[str, str], where: str) -> tuple[Combo | None, list[Problem]]:
    """Effective params: train_params, then the combo's overlays, then the key's three values, then defaults."""
    params = {**base, **overlay, **dict(zip(FORCED, parsed))}
    for name, value in TRAIN_PARAM_DEFAULTS.items():
        params.setdefault(name, value)
    iterations = params["training_iterations"]
    if CHANGEME not in iterations and not _positive_int(iterations):
        source = join_path(where, "training_iterations") if "training_iterations" in overlay else "train_params.training_iterations"
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
    return text.strip().isdigit() and int(text) > 0


def cell_coverage(combos: list[Combo], declared: list[str], cells: list[str]) -> tuple[list[Combo], list[str]]:
    """(combos with no threshold cell, threshold cells that match no declared combination).

    `declared` is every key of sweep.combinations (or `default`): a cell for a combo that is
    declared but not selected in `runs` is not a typo, so it is not reported.
    """
    missing = [c for c in combos if c.cell not in cells]
    extra = [cell for cell in cells if cell not in declared]
    return missing, extra
