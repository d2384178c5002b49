"""TRANSCRIPTION OF BEHAVIOUR, test code only: how each Primus version tokenises CLI overrides, turns
their text into Python values and merges them, written from reading AMD-AGI/Primus (v0.4.0, v0.5.0,
v0.6.0, HEAD fd1eeabb) and checked cell by cell against the table in docs/primus_overrides.md. It is
not Primus code: eval's reach beyond literals (expressions, builtin names) is left out, as the
harness sends neither.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[3] / "docs" / "primus_overrides.md"
VERSIONS = ("v0.4.0", "v0.5.0", "v0.6.0", "v0.6.0 core", "HEAD")
SUPPORTED = ("v0.4.0", "v0.5.0", "v0.6.0", "HEAD")  # what runs by default in each release


def _literal(text: str) -> Any:
    """eval of a literal; anything eval would fail on stays text (NameError, SyntaxError, ...)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _eval_rule(text: str) -> Any:  # v0.4.0, v0.5.0
    return _literal(text)


def _lower_bool_then_eval(text: str) -> Any:  # v0.6.0 launcher path
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return _literal(text)


def _number_rule(text: str) -> Any:  # v0.6.0 core runtime: bool, float, int, else text
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return float(text) if "." in text else int(text)
    except ValueError:
        return text


def _modern_rule(text: str) -> Any:  # HEAD core runtime
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if text == "None" or text[:1] in ("[", "(", "{"):
        value = _literal(text)
        if value is not text:
            return value
    return _number_rule(text)


def _launcher_tokens(tokens: list[str]) -> list[tuple[str, Any]]:
    """v0.4.0–v0.6.0 `_parse_kv_overrides`: `--k=v`, `--k v`, bare `--k` is True, other tokens ignored."""
    pairs, i = [], 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("--"):
            key = token[2:]
            if "=" in key:
                key, value = key.split("=", 1)
                pairs.append((key, value))
            elif i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                pairs.append((key, tokens[i + 1]))
                i += 1
            else:
                pairs.append((key, True))
        i += 1
    return pairs


def _core_v06_tokens(tokens: list[str]) -> list[tuple[str, Any]]:
    """v0.6.0 `parse_cli_overrides`: `k=v`; `--k` takes the next token unless it holds `=` (even a
    `--flag`); anything else is skipped with a warning."""
    pairs, i = [], 0
    while i < len(tokens):
        token = tokens[i]
        if "=" in token:
            key, value = token.split("=", 1)
            pairs.append((key.strip(), value.strip()))
        elif token.startswith("--") and i + 1 < len(tokens) and "=" not in tokens[i + 1]:
            pairs.append((token.lstrip("-"), tokens[i + 1].strip()))
            i += 1
        i += 1
    return pairs


def _modern_tokens(tokens: list[str]) -> list[tuple[str, Any]]:
    """HEAD `parse_cli_overrides`: `[--]k=v`, `--k v` (v not starting `--`), bare `--k` is `true`."""
    pairs, i = [], 0
    while i < len(tokens):
        token = tokens[i].strip()
        if not token:
            pass
        elif "=" in token:
            key, value = token.split("=", 1)
            pairs.append((key.lstrip("-").strip(), value.strip()))
        elif token.startswith("--") and i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            pairs.append((token.lstrip("-"), tokens[i + 1].strip()))
            i += 1
        elif token.startswith("--"):
            pairs.append((token.lstrip("-"), "true"))
        i += 1
    return pairs


RULES: dict[str, tuple[Callable[[list[str]], list], Callable[[str], Any]]] = {
    "v0.4.0": (_launcher_tokens, _eval_rule),
    "v0.5.0": (_launcher_tokens, _eval_rule),
    "v0.6.0": (_launcher_tokens, _lower_bool_then_eval),
    "v0.6.0 core": (_core_v06_tokens, _number_rule),
    "HEAD": (_modern_tokens, _modern_rule),
}


def coerce(version: str, text: str) -> Any:
    """The Python value one override's text becomes under `version`."""
    return RULES[version][1](text)


def parse(version: str, tokens: list[str]) -> dict[str, Any]:
    """The override dict `version` builds from the tokens after `train pretrain --config Y`."""
    tokenise, rule = RULES[version]
    return {key: rule(value) if isinstance(value, str) else value for key, value in tokenise(tokens)}


def merge(version: str, config: dict[str, Any], tokens: list[str]) -> dict[str, Any]:
    """The module config after the overrides: every version sets each value as parsed (`setattr` /
    `deep_merge`), with no null-to-None step and no type check."""
    return {**config, **parse(version, tokens)}


# -- the table in docs/primus_overrides.md ---------------------------------------------------------

_CELL = re.compile(r"^`(.*)`$")


def doc_table() -> dict[str, dict[str, str]]:
    """{version: {column heading: cell text}} from the parse-rule table (backticks stripped)."""
    rows: list[list[str]] = []
    for line in DOC.read_text().splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    header, body = rows[0], [r for r in rows[1:] if r[0] in VERSIONS]
    strip = [_CELL.sub(r"\1", h) for h in header]
    return {row[0]: {strip[i]: _CELL.sub(r"\1", cell) for i, cell in enumerate(row)} for row in body}


SPELLINGS = ("true", "false", "True", "False", "null", "None", "none", "4096", "08")
