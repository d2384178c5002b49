"""One grammar for every name that reaches a path or a shell: sweep keys, run ids, container names,
images, labels. Pure.

Each check returns the problem as text (or None), so config loading can collect problems and the
command line can refuse a flag with exit 2 before anything is written. Every grammar is anchored
with ``\\A...\\Z`` (``$`` would accept a trailing newline) and ASCII only: no control characters,
no path separators, no ``..``. Text that is not a name (a reason, a label in a comment) never
goes into a script raw: ``jobs.shell.q`` / ``jobs.shell.comment`` quote it.
"""

from __future__ import annotations

import re
import unicodedata

# Kind -> (grammar, what it may contain). Declared once; every caller names the kind.
GRAMMARS: dict[str, tuple[re.Pattern[str], str]] = {
    "run id": (re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z"),
               "1-128 of A-Z a-z 0-9 . _ -, starting with a letter or digit"),
    "sweep key": (re.compile(r"\A[A-Za-z0-9][A-Za-z0-9=,._+-]{0,199}\Z"),
                  "1-200 of A-Z a-z 0-9 = , . _ + -"),
    "label": (re.compile(r"\A[A-Za-z0-9][A-Za-z0-9=,._+-]{0,199}\Z"),
              "1-200 of A-Z a-z 0-9 = , . _ + -"),
    "container name": (re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z"),
                       "Docker's container-name grammar: 1-128 of A-Z a-z 0-9 _ . -, starting with a letter or digit"),
    # registry[:port]/path[:tag][@digest]: never starts with '-', no spaces or shell characters
    "image": (re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,511}\Z"),
              "a Docker image reference (registry/name:tag or @sha256:...), starting with a letter or digit"),
    "host": (re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._:%-]{0,252}\Z"),
             "a host name or IP address: A-Z a-z 0-9 . _ : % -, starting with a letter or digit"),
    "model name": (re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z"),
                   "1-128 of A-Z a-z 0-9 . _ - (it names the tokenizer cache folder and the Primus YAML)"),
    "tokenizer": (re.compile(r"\A[A-Za-z0-9/][A-Za-z0-9._/-]{0,255}\Z"),
                  "a Hugging Face repo id (org/name) or an absolute path: A-Z a-z 0-9 . _ - /"),
    "user name": (re.compile(r"\A[A-Za-z0-9_][A-Za-z0-9._@-]{0,63}\Z"),
                  "a login name: 1-64 of A-Z a-z 0-9 . _ @ -, starting with a letter, digit or _"),
    "registry": (re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._/:@-]{0,252}\Z"),
                 "a registry address (host[:port], or a URL), starting with a letter or digit"),
    "env name": (re.compile(r"\A[A-Za-z_][A-Za-z0-9_]{0,127}\Z"),
                 "letters, digits and _, not starting with a digit"),
}

ASCII_DIGITS = re.compile(r"\A[0-9]+\Z")
"""`str.isdigit()` accepts '²' and '٤'; a size that reaches a launcher must be ASCII 0-9."""

ASCII_DECIMAL = re.compile(r"\A\s*-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]{1,3})?\s*\Z")
"""A number as text: `float()` also takes '٣', 'nan' and 'inf', which no flag or gate means."""

SECRET_ENV_NAME = re.compile(r"TOKEN|PASSWORD|PASSWD|SECRET|API_?KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL", re.I)
"""The one rule for env names that look like secrets (refused in container.env: values of
container.env end up on the docker command line and in `docker inspect`)."""


def identifier_problem(kind: str, value: object) -> str | None:
    """Why ``value`` is not a valid ``kind`` (a sentence), or None when it is."""
    pattern, allowed = GRAMMARS[kind]
    if not isinstance(value, str):
        return f"must be a string (got {type(value).__name__})"
    bad = control_characters(value)
    if bad:
        return f"contains control character(s) {', '.join(bad)}; a {kind} must be {allowed}"
    has_parent = ".." in value.split("/") if kind in ("image", "registry", "tokenizer") else ".." in value
    if has_parent:
        return f"must not contain '..' ({value!r}); a {kind} must be {allowed}"
    if not pattern.match(value):
        return f"{value!r} is not a valid {kind}: use {allowed}"
    return None


def control_characters(text: str) -> list[str]:
    """Control and format characters in ``text``, as escapes (``\\n``, ``\\x1b``, ``\\u202e``)."""
    found: list[str] = []
    for ch in text:
        if (unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp")
                and (esc := ch.encode("unicode_escape").decode("ascii")) not in found):
            found.append(esc)
    return found


def is_ascii_positive_int(text: str) -> bool:
    """`"4"` yes; `"٤"`, `"²"`, `"0"`, `"-1"`, `" 4\\n"` (whitespace aside) no."""
    stripped = text.strip()
    return bool(ASCII_DIGITS.match(stripped)) and len(stripped) <= 18 and int(stripped) > 0


def looks_like_secret_env(name: str) -> bool:
    return bool(SECRET_ENV_NAME.search(name))
