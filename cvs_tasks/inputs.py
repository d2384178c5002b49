"""One bounded reader for every file the harness reads: configs, thresholds, cluster files, secrets,
known_hosts, run records (and, later, logs).

A file is opened without blocking (``O_NONBLOCK``: a FIFO cannot hang the open), checked with
``fstat`` to be a regular file (a FIFO, a device such as ``/dev/zero``, a directory are refused
before a byte is read), and read up to a size limit. Text must be UTF-8; JSON must stay within a
nesting depth, integers within a digit count, and may hold neither ``NaN``/``Infinity`` nor lone
surrogates. Every refusal is an ``InputRefused`` (exit 2) naming the file and, for JSON, the line or
the dotted path. TOML (stdlib ``tomllib``) is held to the same limits, and its dates and times,
which JSON cannot hold and no field takes, are refused by dotted path.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cvs_tasks.errors import BadInput

MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """What one kind of file may be: at most ``max_bytes``, JSON nested at most ``max_depth``."""

    max_bytes: int
    max_depth: int = 64
    max_int_digits: int = 30


# Declared once; the README's "Input limits" table lists the same numbers.
LIMITS: dict[str, Limits] = {
    "config": Limits(4 * MiB),
    "threshold": Limits(4 * MiB),
    "cluster": Limits(4 * MiB),
    "secret": Limits(64 * 1024),
    "known_hosts": Limits(16 * MiB),
    "run record": Limits(256 * MiB),
}

# A JSON string (an unterminated one runs to the end of the text, so no start is scanned twice: the
# scan stays linear in the text, also for `"\"\"\"...` without a closing quote), or a bracket.
_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)|[\[\]{}]', re.S)


class InputRefused(BadInput):
    """A file the harness will not read as given: which file, where in it, what to do."""

    def __init__(self, path: Path | str, message: str, where: str = "") -> None:
        self.path = Path(path)
        self.where = where
        self.message = message
        super().__init__(f"{self.path}: {where + ': ' if where else ''}{message}")


def open_regular(path: Path | str, what: str) -> int:
    """An fd open for reading on a regular file, never blocking: a FIFO, a device or a directory is
    refused before a byte is read. For readers that stream (logs): wrap it with ``os.fdopen``."""
    path = Path(path).expanduser()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputRefused(path, f"{what} file not found (tried {path.absolute()})") from None
    except OSError as exc:
        raise InputRefused(path, f"cannot read the {what} file: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise InputRefused(path, f"cannot read the {what} file: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise InputRefused(path, f"the {what} file is {_kind(info.st_mode)}, not a regular file; point to a file")
    return fd


def read_bytes(path: Path | str, what: str) -> bytes:
    """The whole file, if it is a regular file within the ``what`` size limit; else InputRefused."""
    path = Path(path).expanduser()
    limit = LIMITS[what].max_bytes
    fd = open_regular(path, what)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise InputRefused(path, f"the {what} file is {size} bytes, over the {_size(limit)} limit")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 * MiB, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # grew while being read
                raise InputRefused(path, f"the {what} file is over the {_size(limit)} limit")
        return b"".join(chunks)
    except OSError as exc:
        raise InputRefused(path, f"cannot read the {what} file: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def decode_utf8(data: bytes, path: Path | str, what: str) -> str:
    """Strict UTF-8 (a leading BOM is dropped); a bad byte is named by offset, line and column."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputRefused(path, f"not UTF-8 text (byte {exc.start}, line {line} column {column}: "
                           f"{data[exc.start:exc.start + 1]!r}); save the {what} file as UTF-8") from None


def read_text(path: Path | str, what: str) -> str:
    return decode_utf8(read_bytes(path, what), path, what)


def secret_lines(text: str) -> list[str]:
    """Every line of a token or password file that is not blank or a ``#`` comment: each is secret."""
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def read_secret(path: Path | str) -> list[str]:
    """The secret lines of a token or password file (read with the ``secret`` limits)."""
    return secret_lines(read_text(path, "secret"))


def load_json(path: Path | str, what: str) -> tuple[Any, bytes]:
    """(parsed JSON, raw bytes) of a file, every limit applied; InputRefused otherwise."""
    data = read_bytes(path, what)
    return parse_json(decode_utf8(data, path, what), path, what), data


class _Refused(ValueError):
    pass


def parse_json(text: str, path: Path | str, what: str) -> Any:
    """Parse JSON text within the ``what`` limits: depth, integer digits, finite numbers, no
    duplicate keys, no lone surrogates."""
    limits = LIMITS[what]
    depth, line = _max_depth(text)
    if depth > limits.max_depth:
        raise InputRefused(path, f"JSON nested {depth} levels deep (limit {limits.max_depth})", f"line {line}")
    duplicates: list[str] = []

    def as_int(token: str) -> int:
        if len(token.lstrip("-")) > limits.max_int_digits:
            raise _Refused(f"an integer of {len(token.lstrip('-'))} digits (limit {limits.max_int_digits})")
        return int(token)

    def as_float(token: str) -> float:
        value = float(token)
        if not math.isfinite(value):
            raise _Refused(f"the number {token[:40]} is out of range")
        return value

    def constant(token: str) -> Any:
        raise _Refused(f"{token} is not a JSON number; write a finite number")

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in pairs:
            if key in obj:
                duplicates.append(key)
            obj[key] = value
        return obj

    try:
        obj = json.loads(text, parse_int=as_int, parse_float=as_float, parse_constant=constant,
                         object_pairs_hook=pairs_hook)
    except json.JSONDecodeError as exc:
        raise InputRefused(path, f"invalid JSON: {exc.msg}", f"line {exc.lineno} column {exc.colno}") from None
    except _Refused as exc:
        raise InputRefused(path, str(exc)) from None
    except RecursionError:  # the depth scan should have caught it; never a traceback
        raise InputRefused(path, f"JSON nested too deep (limit {limits.max_depth})") from None
    if duplicates:
        key = duplicates[0]
        raise InputRefused(path, f"key {key!r} appears twice in one object; JSON would silently keep only "
                           "the last, remove one")
    bad = _surrogate_path(obj)
    if bad is not None:
        raise InputRefused(path, "contains a lone surrogate (\\ud800-\\udfff escape), which is not text; "
                           "remove it", bad or "(top level)")
    return obj


def load_toml(path: Path | str, what: str) -> tuple[Any, bytes]:
    """(parsed TOML, raw bytes) of a file, every limit applied; InputRefused otherwise."""
    data = read_bytes(path, what)
    return parse_toml(decode_utf8(data, path, what), path, what), data


_TOML_AT = re.compile(r"\s*\(at (line \d+, column \d+|end of document)\)\s*$")
# TOML strings (multi-line, basic, literal; an unterminated one ends at the end of its line or text),
# and a dotted key of at least N dots outside them: tomllib nests a dotted key in time quadratic in
# its parts (80 KB of `a.a.a...` took two minutes), so one deeper than the limit is refused first.
_TOML_STRING = re.compile(r'"""[\s\S]*?(?:"""|\Z)' r"|'''[\s\S]*?(?:'''|\Z)"
                          r'|"(?:[^"\\\n]|\\.)*+(?:"|$)' r"|'[^'\n]*+(?:'|$)", re.M)
_TOML_DOTS = r'(?<![\w-])(?:(?:[\w-]++|"")\s*+\.\s*+){%d,}'


def _toml_deep_key(text: str, max_depth: int) -> tuple[int, int] | None:
    """(parts, line) of the first dotted key nested deeper than ``max_depth``, in linear time."""
    blanked = _TOML_STRING.sub(lambda m: '""' + "\n" * m.group().count("\n"), text)
    deep = re.search(_TOML_DOTS % max_depth, blanked)
    if deep is None:
        return None
    return deep.group().count(".") + 1, blanked.count("\n", 0, deep.start()) + 1


def parse_toml(text: str, path: Path | str, what: str) -> Any:
    """Parse TOML text within the ``what`` limits: the JSON limits (depth, integer digits, finite
    numbers; TOML itself refuses duplicate keys and lone surrogates), and no dates or times."""
    limits = LIMITS[what]
    deep = _toml_deep_key(text, limits.max_depth)
    if deep:
        raise InputRefused(path, f"a dotted key of {deep[0]}+ parts nests deeper than the limit "
                           f"({limits.max_depth})", f"line {deep[1]}")
    try:
        obj = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        at = _TOML_AT.search(message)
        where = at.group(1).replace(", ", " ") if at else ""
        message = _TOML_AT.sub("", message)
        if message == "Cannot overwrite a value":
            message += " (a key or table is defined twice; remove one)"
        raise InputRefused(path, f"invalid TOML: {message}", where) from None
    except RecursionError:
        raise InputRefused(path, f"TOML nested too deep (limit {limits.max_depth})") from None
    stack: list[tuple[Any, str, int]] = [(obj, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if isinstance(value, (dict, list)) and depth + 1 > limits.max_depth:
            raise InputRefused(path, f"TOML nested {depth + 1} levels deep (limit {limits.max_depth})",
                               where or "(top level)")
        if isinstance(value, dict):
            stack.extend((item, f"{where}.{key}" if where else str(key), depth + 1) for key, item in value.items())
        elif isinstance(value, list):
            stack.extend((item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value))
        elif isinstance(value, bool):
            continue
        elif isinstance(value, int) and len(str(abs(value))) > limits.max_int_digits:
            raise InputRefused(path, f"an integer of {len(str(abs(value)))} digits (limit "
                               f"{limits.max_int_digits})", where)
        elif isinstance(value, float) and not math.isfinite(value):
            raise InputRefused(path, f"{value} is not a finite number; write a finite number", where)
        elif isinstance(value, (datetime.date, datetime.time)):
            raise InputRefused(path, f"a TOML date/time ({value.isoformat()}) is not a value any field "
                               "takes; quote it if you meant text", where)
    return obj


def _max_depth(text: str) -> tuple[int, int]:
    """(deepest bracket nesting outside strings, the line where it is reached), in one pass."""
    depth = deepest = 0
    at = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > deepest:
                deepest, at = depth, match.start()
        elif token in ("]", "}"):
            depth -= 1
    return deepest, text.count("\n", 0, at) + 1


def _surrogate_path(obj: Any, path: str = "") -> str | None:
    """Dotted path of the first string (key or value) holding a lone surrogate, or None."""
    stack: list[tuple[Any, str]] = [(obj, path)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            if not _encodable(value):
                return where
        elif isinstance(value, dict):
            for key, item in value.items():
                child = f"{where}.{key}" if where else key
                if not _encodable(key):
                    return child.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
                stack.append((item, child))
        elif isinstance(value, list):
            stack.extend((item, f"{where}[{i}]") for i, item in enumerate(value))
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n // 1024} KiB"
