"""Hostile input to the config loader: arbitrary JSON, a valid config with any field replaced by any
JSON value, arbitrary bytes and invalid UTF-8. Each must load or fail as a BadInput (exit 2) with
a message naming the file — never another exception (which the CLI would show as a traceback)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cvs_tasks.config import load_cluster, load_suite
from cvs_tasks.errors import BadInput
from tests.reliability.helpers import CONFIGS, invoke, no_traceback

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
BASE = json.loads((CONFIGS / "sim_megatron_single.json").read_text())
THRESHOLDS = (CONFIGS.parents[1] / "thresholds" / "testbed" / "sim_megatron_single_threshold.json").read_text()

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)


def key_paths(obj, prefix=()):
    """Every (path) to a value inside ``obj`` (dict keys and list indices)."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from key_paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from key_paths(v, prefix + (i,))


PATHS = [p for p in key_paths(BASE) if p]


def replaced(obj, path, value):
    out = copy.deepcopy(obj)
    target = out
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return out


def load_or_bad_input(path: Path, what: str = "suite") -> None:
    try:
        if what == "suite":
            load_suite(path)
        else:
            load_cluster(path)
    except BadInput as exc:
        text = str(exc)
        assert text.strip(), "an empty error message"
        assert str(path.name) in text or "config" in text.lower(), text


def write_suite(tmp: Path, content: bytes) -> Path:
    (tmp / "thr.json").write_text(THRESHOLDS)
    path = tmp / "suite.json"
    path.write_bytes(content)
    return path


@SETTINGS
@given(value=json_values)
def test_arbitrary_json_is_loaded_or_refused_clearly(tmp_path, value):
    load_or_bad_input(write_suite(tmp_path, json.dumps(value).encode()))


@SETTINGS
@given(path=st.sampled_from(PATHS), value=json_values)
def test_any_field_replaced_by_any_json_is_loaded_or_refused_clearly(tmp_path, path, value):
    cfg = replaced(BASE, path, value)
    if isinstance(cfg.get("threshold_json"), str):
        cfg["threshold_json"] = "thr.json"
    load_or_bad_input(write_suite(tmp_path, json.dumps(cfg).encode()))


@SETTINGS
@given(data=st.binary(max_size=2000))
def test_arbitrary_bytes_are_refused_clearly(tmp_path, data):
    load_or_bad_input(write_suite(tmp_path, data))


@SETTINGS
@given(cut=st.integers(min_value=0, max_value=len(json.dumps(BASE))), junk=st.binary(max_size=8))
def test_truncated_or_invalid_utf8_config_is_refused_clearly(tmp_path, cut, junk):
    load_or_bad_input(write_suite(tmp_path, json.dumps(BASE).encode()[:cut] + junk + b"\xff\xfe"))


@SETTINGS
@given(value=json_values)
def test_arbitrary_cluster_file_is_loaded_or_refused_clearly(tmp_path, value):
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"username": "root", "node_dict": value}) if isinstance(value, (dict, list))
                    else json.dumps(value))
    load_or_bad_input(path, "cluster")


@pytest.mark.parametrize("content", [b"\x00\x01\x02binary", b'{"gpu_name": ', "{\"gpu_name\": \"\udcff\"}".encode(
    "utf-8", "surrogatepass"), b"[]", b"{}" * 100000], ids=["binary", "truncated", "invalid-utf8", "array", "huge"])
def test_the_cli_shows_a_clear_error_and_no_traceback(content, tmp_path, reports):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    res = invoke("config.validate", "--config", str(bad),
                 "--cluster", str(CONFIGS.parents[1] / "cluster" / "localhost.json"), reports=reports, timeout=60)
    assert res.code == 2, res.out + res.err
    no_traceback(res)
    assert "bad.json" in res.err, res.err
