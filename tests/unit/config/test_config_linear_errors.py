"""A malformed file is refused in time linear in its size: the nesting scan that runs before the
JSON parser used to rescan from every quote of an unterminated string full of escaped quotes
(`"\"\"\"...`), 75 s for 80 KB and four times that for each doubling."""

from __future__ import annotations

import time

import pytest

from cvs_tasks.config.errors import ConfigError, read_object
from cvs_tasks.inputs import InputRefused, parse_json, parse_toml
from cvs_tasks.run.rundir import load_record_file


def _escaped_quotes(size: int) -> str:
    return '{"gpu_name": "' + '\\"' * (size // 2)


def _refusal_seconds(tmp_path, size: int) -> float:
    path = tmp_path / f"bad_{size}.json"
    path.write_text(_escaped_quotes(size))
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        with pytest.raises(ConfigError) as caught:
            read_object(path)
        best = min(best, time.process_time() - start)
    assert "line 1 column 14" in str(caught.value) and "Unterminated string" in str(caught.value)
    return best


def test_a_malformed_config_is_refused_in_linear_time(tmp_path):
    small, large = _refusal_seconds(tmp_path, 80_000), _refusal_seconds(tmp_path, 320_000)
    assert large < 5.0
    assert large < 8 * small + 0.25  # 4x the size: linear is ~4x, the old scan was 16x


def test_a_bad_stage_record_is_skipped_in_linear_time(tmp_path):
    record = tmp_path / "training.json"
    record.write_text(_escaped_quotes(320_000))
    start = time.process_time()
    assert load_record_file(record) is None
    assert time.process_time() - start < 5.0


@pytest.mark.parametrize("text", [
    '{"a": "[[[[[[[[", "b": [1]}',              # brackets inside a string do not nest
    '{"a": "\\"[[[[[[[[\\"", "b": [1]}',       # nor after an escaped quote
])
def test_brackets_in_strings_do_not_nest(text):
    assert parse_json(text, "x.json", "config")["b"] == [1]


def test_real_nesting_still_counts_and_names_its_line():
    text = '{"a": "[[[[",\n "b": ' + "[" * 70 + "]" * 70 + "}"
    with pytest.raises(InputRefused, match="nested 71 levels") as caught:
        parse_json(text, "x.json", "config")
    assert caught.value.where == "line 2"


def test_a_trailing_backslash_in_an_unterminated_string_is_a_json_error():
    with pytest.raises(InputRefused, match="invalid JSON"):
        parse_json('{"a": "\\', "x.json", "config")


def _toml_refusal_seconds(tmp_path, size: int) -> float:
    path = tmp_path / f"deep_{size}.toml"
    path.write_text('gpu_name = "MI300X"\n' + "a." * (size // 2) + "b = 1\n")
    start = time.process_time()
    with pytest.raises(ConfigError) as caught:
        read_object(path)
    took = time.process_time() - start
    assert caught.value.problems[0][0] == "line 2" and "nests deeper than the limit (64)" in str(caught.value)
    return took


def test_a_deep_dotted_toml_key_is_refused_in_linear_time(tmp_path):
    """tomllib nests `a.a.a...` in time quadratic in its parts: 80 KB took two minutes."""
    small, large = _toml_refusal_seconds(tmp_path, 80_000), _toml_refusal_seconds(tmp_path, 320_000)
    assert large < 5.0 and large < 8 * small + 0.25


@pytest.mark.parametrize("text, line", [
    ("[" + "t." * 70 + "x]\n", 1),                                      # a table header
    ("a = {" + "b . " * 70 + "c = 1}\n", 1),                            # inside an inline table
    ('s = """\nnot.a.key\n"""\n' + "q." * 70 + "q = 1\n", 4),           # after a multi-line string
    ('a."x.y".' * 40 + "b = 1\n", 1),                                   # quoted parts count once
])
def test_deep_toml_keys_are_found_wherever_they_are(text, line):
    with pytest.raises(InputRefused, match="nests deeper") as caught:
        parse_toml(text, "x.toml", "config")
    assert caught.value.where == f"line {line}"


@pytest.mark.parametrize("text", [
    "a" + ".a" * 62 + " = 1\n",                                         # 63 parts: within the limit
    's = "' + "a." * 200 + '"\n',                                       # dots in a string
    "s = '''\n" + "a." * 200 + "\n'''\n",                              # dots in a multi-line literal
    "v = [" + "1.5, " * 200 + "]\n",                                    # floats are no key
])
def test_dots_that_are_no_deep_key_pass(text):
    assert parse_toml(text, "x.toml", "config")
