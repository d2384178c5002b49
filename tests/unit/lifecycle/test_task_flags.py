"""Numeric flags are read as text and checked by one helper: whole or finite, in range, the flag named
(invoke itself would print a traceback for `abc` in a flag whose default is a number)."""

from __future__ import annotations

import inspect

import pytest

from cvs_tasks.errors import BadInput
from cvs_tasks.tasks import history, logs, testbed
from cvs_tasks.tasks._common import number_flag, seconds_flag


@pytest.mark.parametrize("value, expected", [(None, 5), ("", 5), ("7", 7), (" 12 ", 12), (3, 3)])
def test_a_whole_flag_takes_digits_or_its_default(value, expected):
    assert number_flag("runs", value, 5, 1, 1000, whole=True) == expected


@pytest.mark.parametrize("value, words", [
    ("abc", "--runs: 'abc' is not a whole number"),
    ("2.5", "--runs: '2.5' is not a whole number"),
    ("1e3", "--runs: '1e3' is not a whole number"),
    ("٣", "is not a whole number"),
    ("0", "--runs: '0' is out of range (must be at least 1 and at most 1000)"),
    ("1001", "out of range"),
    ("9" * 40, "is not a whole number"),
])
def test_a_bad_whole_flag_is_named(value, words):
    with pytest.raises(BadInput) as caught:
        number_flag("runs", value, 5, 1, 1000, whole=True)
    assert words in str(caught.value)


@pytest.mark.parametrize("value, words", [
    ("nan", "'nan' is not a finite number"), ("inf", "is not a finite number"), ("-inf", "is not a finite number"),
    ("1e999", "out of range"), ("-5", "'-5' is out of range (must be at least 0 and at most 100 %)"),
    ("abc", "is not a finite number"),
])
def test_a_bad_float_flag_is_named(value, words):
    with pytest.raises(BadInput) as caught:
        number_flag("margin-pct", value, 5.0, 0, 100, unit=" %")
    assert str(caught.value).startswith("--margin-pct: ") and words in str(caught.value)


def test_a_float_flag_takes_decimals_and_the_open_bound_excludes_its_end():
    assert number_flag("margin-pct", "2.5", 5.0, 0, 100) == 2.5
    assert seconds_flag("timeout", "0.5", 10.0) == 0.5
    with pytest.raises(BadInput, match="must be above 0"):
        seconds_flag("timeout", "0", 10.0)


@pytest.mark.parametrize("fn, flags", [
    (history.show, ("limit",)), (history.calibrate, ("runs", "min_runs", "margin_pct")),
    (testbed.up, ("nodes", "docker_nodes")), (logs.parse, ("seq_length", "world_size")),
])
def test_numeric_flags_default_to_none_so_invoke_hands_them_over_as_text(fn, flags):
    params = inspect.signature(getattr(fn, "body", fn)).parameters
    assert all(params[name].default is None for name in flags)
