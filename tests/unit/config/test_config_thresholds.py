"""Threshold file: spec kinds and their required fields, cell keys, metric names, discovery."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_helpers import FIXTURES, FP8, minimal_thresholds, write_json

from cvs_tasks.config import ConfigError, ThresholdSpec, load_threshold_file
from cvs_tasks.config.thresholds import expected_threshold_name, find_threshold_file


@pytest.mark.parametrize("spec", [
    {"kind": "min", "value": 1}, {"kind": "max", "value": "2.5"}, {"kind": "max_ms", "value": 500},
    {"kind": "min_tok_s", "value": 1000}, {"kind": "within", "value": 100, "tolerance_pct": 5},
    {"kind": "min_ratio", "value": 0.9, "reference": "training.tokens_per_gpu"}, {"kind": "info"},
    {"kind": "max", "value": 0.9, "optional": True},
])
def test_every_kind_with_its_fields_is_accepted(spec):
    parsed = ThresholdSpec.model_validate(spec)
    assert parsed.kind == spec["kind"]
    assert parsed.value == (float(spec["value"]) if "value" in spec else None)


@pytest.mark.parametrize("spec, words", [
    ({"kind": "min"}, "needs a numeric value"),
    ({"kind": "within", "value": 100}, "needs tolerance_pct"),
    ({"kind": "within", "value": -5, "tolerance_pct": 5}, "inverts the band"),
    ({"kind": "min_ratio", "value": 0.9}, "needs reference"),
])
def test_kinds_missing_their_fields_are_rejected(spec, words):
    with pytest.raises(ValueError, match=words):
        ThresholdSpec.model_validate(spec)


def test_problem_file_reports_each_spec_by_cell_and_metric():
    cells, _, problems, _ = load_threshold_file(FIXTURES / "problem_thresholds.json")
    found = dict(problems)
    cell = f'["{FP8}"]'
    assert "'min'" in found[f'{cell}["training.throughput_per_gpu"].kind']
    assert "needs a numeric value" in found[f'{cell}["training.tokens_per_gpu"]']
    assert "tolerance_pct" in found[f'{cell}["training.elapsed_time_per_iteration"]']
    assert found[f'{cell}["training.mem_usage"].optinal'] == "unknown key (did you mean 'optional'?)"
    assert "start with 'training.'" in found[f"{cell}.throughput_per_gpu"]
    assert "(did you mean 'training.throughput_per_gpu'?)" in found[f"{cell}.throughput_per_gpu"]
    assert "invalid cell key" in found['["MBS=4 GBS=128"]']


def test_threshold_problems_name_the_threshold_file(suite_files, tmp_path):
    path = suite_files(thresholds={FP8: {"training.throughput_per_gpu": {"kind": "least", "value": 1}}})
    with pytest.raises(ConfigError) as info:
        from cvs_tasks.config import load_suite
        load_suite(path)
    assert info.value.file == tmp_path / "thr.json"
    assert str(info.value).startswith(f"config error in {tmp_path / 'thr.json'}:")


def test_threshold_json_syntax_error_names_the_threshold_file(tmp_path):
    bad = tmp_path / "t.json"
    bad.write_text('{"a": }')
    with pytest.raises(ConfigError) as info:
        load_threshold_file(bad)
    assert info.value.file == bad and info.value.problems[0][0] == "line 1 column 7"


def test_unknown_training_metric_is_a_warning_not_an_error(tmp_path):
    path = write_json(tmp_path / "t.json", {FP8: {"training.throughput_per_gpus": {"kind": "min", "value": 1}}})
    cells, _, problems, warnings = load_threshold_file(path)
    assert problems == [] and "training.throughput_per_gpus" in cells[FP8]
    assert "did you mean 'training.throughput_per_gpu'" in warnings[0]


def test_comment_keys_are_dropped(tmp_path):
    cells, _, problems, _ = load_threshold_file(write_json(tmp_path / "t.json", minimal_thresholds(FP8)))
    assert list(cells) == [FP8] and problems == []


def test_expected_threshold_name_swaps_the_shared_prefix_for_the_sku():
    name = expected_threshold_name(Path("mi3xx_megatron_llama-3.1-8b_single.json"), " mi325x")
    assert name == "mi325x_megatron_llama-3.1-8b_single_threshold.json"


def test_empty_threshold_json_finds_the_sku_file_in_the_search_dirs(tmp_path):
    shared = tmp_path / "shared"
    write_json(shared / "mi300x_megatron_m_single_threshold.json", {})
    config = write_json(tmp_path / "cfg" / "mi3xx_megatron_m_single.json", {})
    found, why = find_threshold_file("", config, "MI300X", [shared])
    assert why is None and found == shared / "mi300x_megatron_m_single_threshold.json"
    found, why = find_threshold_file("", config, "MI325X", [shared])
    assert found is None and "mi325x_megatron_m_single_threshold.json" in why


def test_explicit_relative_path_prefers_the_config_folder(tmp_path):
    shared = tmp_path / "shared"
    write_json(shared / "t.json", {})
    config = write_json(tmp_path / "cfg" / "c.json", {})
    assert find_threshold_file("t.json", config, "", [shared]) == (shared / "t.json", None)
    write_json(tmp_path / "cfg" / "t.json", {})
    assert find_threshold_file("t.json", config, "", [shared]) == (tmp_path / "cfg" / "t.json", None)
    absolute = str(shared / "t.json")
    assert find_threshold_file(absolute, config, "", [])[0] == shared / "t.json"
