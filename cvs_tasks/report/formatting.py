"""Human forms of the numbers, times and names every report surface shows.

One place, so the HTML pages, the JUnit text and the console agree on how a value looks, and a
missing value always reads as an em dash instead of crashing a template.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any

DASH = "—"
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
METRIC_PREFIX = "training."

STATUS_COLOURS: dict[str, str] = {
    "PASS": "#2e7d32",
    "FAIL": "#c62828",
    "ERROR": "#e65100",
    "SKIPPED": "#757575",
    "NOT-RUN": "#6d4c41",
    "RECORD": "#555555",
}


def is_number(value: Any) -> bool:
    """True for real, finite-or-not numbers (bool excluded: it is never a metric)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def fmt_number(value: Any) -> str:
    """A compact, readable number: thousands separators when large, enough digits when small."""
    if value is None or value == "":
        return DASH
    if not is_number(value):
        return str(value)
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return str(value)
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.1f}"
    if magnitude >= 0.01:
        return f"{value:.4f}".rstrip("0").rstrip(".")
    return f"{value:.3g}"


def fmt_duration(seconds: Any) -> str:
    """``12.3 s``, ``4 m 05 s``, ``1 h 02 m``; a dash when unknown."""
    if not is_number(seconds) or seconds < 0:
        return DASH
    if seconds < 60:
        return f"{seconds:.1f} s"
    total = int(round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} m"
    return f"{minutes} m {secs:02d} s"


def fmt_test_duration(status: Any, seconds: Any) -> str:
    """A test row's duration; a skip decided in no time shows a dash, not "0.0 s"."""
    if status in ("SKIPPED", "NOT-RUN") and (not is_number(seconds) or seconds < 0.05):
        return DASH
    return fmt_duration(seconds)


def fmt_time(unix_seconds: Any) -> str:
    """UTC wall-clock time, so a report reads the same wherever it is opened or rendered."""
    if not is_number(unix_seconds) or unix_seconds <= 0:
        return DASH
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(unix_seconds))


def or_dash(value: Any) -> str:
    """Any manifest field as text: lists joined, booleans as yes/no, missing as a dash."""
    if value is None or value == "" or value == [] or value == {}:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    if is_number(value):
        return fmt_number(value)
    return str(value)


def short_metric(name: str) -> str:
    """``training.throughput_per_gpu`` -> ``throughput_per_gpu`` (the report's Metric column)."""
    return name[len(METRIC_PREFIX):] if name.startswith(METRIC_PREFIX) else name


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def plain_text(text: Any) -> str:
    """Log text without ANSI colour codes or other control characters (they render as boxes)."""
    return _CONTROL.sub("", _ANSI.sub("", "" if text is None else str(text)))


_NUMBER = r"[-+]?[\d.,]+(?:e[-+]?\d+)?"
# ">= 420", "within [1, 2] (median ...)", "500 +/-5%": the bound's number(s), then the rest; a ratio
# (">= 0.9 x other_metric") has no unit.
_BOUND = re.compile(rf"^((?:>=|<=|>|<|within)\s*(?:\[[^\]]*\]|{_NUMBER})|{_NUMBER}(?=\s*\+/-))(.*)$",
                    re.IGNORECASE)


def bound_text(expected: Any, unit: str) -> str:
    """A gate's bound with its unit: ``>= 420`` and ``TFLOP/s/GPU`` -> ``>= 420 TFLOP/s/GPU``; a bound
    that already names the unit (``<= 3200 ms``) or has no number to attach it to stays as it is."""
    text = str(expected or "").strip() or DASH
    if not unit or unit in text or " x " in text:
        return text
    found = _BOUND.match(text)
    return f"{found.group(1)} {unit}{found.group(2)}" if found else text
