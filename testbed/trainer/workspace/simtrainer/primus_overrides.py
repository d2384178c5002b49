"""How the chosen Primus version parses CLI overrides, and what Megatron then refuses at start.

A stand-in that accepts any string hides the harness's mistakes: `--recompute_granularity null`
stays the string 'null' under every Primus version and Megatron's TransformerConfig raises;
`--use_torch_fsdp2 false` stays the string 'false' (true) under v0.4.0 / v0.5.0. The rules are
docs/primus_overrides.md's table (literals only: the real eval also evaluates expressions).
`SIM_PRIMUS_VERSION` picks the version (default HEAD: the per-GPU, per-precision YAML layout and
the core runtime's log lines this workspace imitates).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

VERSIONS = ("v0.4.0", "v0.5.0", "v0.6.0", "HEAD")
DEFAULT_VERSION = "HEAD"
# Megatron's texts (TransformerConfig.__post_init__, validate_args).
RECOMPUTE_ERROR = 'When using recompute_granuarlity: {value} must be "full"or "selective".'
FSDP2_DISTOPT = "--use-torch-fsdp2 is not supported with MCore's distributed optimizer"


def version_from(env: dict) -> str:
    wanted = (env.get("SIM_PRIMUS_VERSION") or DEFAULT_VERSION).strip()
    for version in VERSIONS:
        if version.lower() == wanted.lower():
            return version
    raise SystemExit(f"SIM_PRIMUS_VERSION={wanted!r}: expected one of {', '.join(VERSIONS)}")


def _literal(text: str) -> object:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def coerce(version: str, text: str) -> object:
    """The Python value one override's text becomes under `version`."""
    if version != "v0.4.0" and version != "v0.5.0" and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if version != "HEAD":
        return _literal(text)  # v0.4.0–v0.6.0: eval, else the text
    if text == "None" or text[:1] in ("[", "(", "{"):
        value = _literal(text)
        if value is not text:
            return value
    try:
        return float(text) if "." in text else int(text)
    except ValueError:
        return text


def _pairs(version: str, tokens: list[str]) -> list[tuple[str, object]]:
    """`--k v`, `--k=v`, bare `--k` (True); HEAD also reads `k=v`, the launcher path ignores it."""
    pairs, i = [], 0
    while i < len(tokens):
        token = tokens[i].strip() if version == "HEAD" else tokens[i]
        if token.startswith("--") or (version == "HEAD" and "=" in token):
            key = token.lstrip("-") if version == "HEAD" else token[2:]
            if "=" in key:
                key, value = key.split("=", 1)
                pairs.append((key.strip(), value.strip() if version == "HEAD" else value))
            elif i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                pairs.append((key, tokens[i + 1].strip() if version == "HEAD" else tokens[i + 1]))
                i += 1
            else:
                pairs.append((key, True))
        i += 1
    return pairs


def parse(version: str, tokens: list[str]) -> dict[str, object]:
    return {key: coerce(version, value) if isinstance(value, str) else value for key, value in _pairs(version, tokens)}


def yaml_scalar(text: str | None) -> object:
    """A YAML 1.1 scalar as PyYAML loads it, for the few keys Megatron checks at start."""
    if text is None:
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if text in ("null", "Null", "NULL", "~", ""):
        return None
    try:
        return int(text)
    except ValueError:
        return text


@dataclass(frozen=True)
class StartupError:
    """What Megatron raises: in validate_args (before the arguments dump) or building the model (after)."""

    before_dump: bool
    exception: str
    reason: str


def megatron_refusals(values: dict[str, object]) -> list[StartupError]:
    """Megatron's start-up checks on the merged values (a string is read by truthiness, as Megatron does)."""
    errors = []
    if values.get("use_torch_fsdp2") and values.get("use_distributed_optimizer"):
        errors.append(StartupError(True, f"AssertionError: {FSDP2_DISTOPT}", "FSDP2 with the distributed optimizer"))
    granularity = values.get("recompute_granularity")
    if granularity is not None and granularity not in ("full", "selective"):
        errors.append(StartupError(False, "ValueError: " + RECOMPUTE_ERROR.format(value=granularity),
                                   f"recompute_granularity {granularity!r}"))
    return errors
