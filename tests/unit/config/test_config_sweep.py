"""Sweep key grammar, runs, the implicit default combo and the per-combo overlay merge (pure)."""

from __future__ import annotations

import pytest
from config_helpers import BF16, FP8, minimal_config

from cvs_tasks.config import TRAIN_PARAM_DEFAULTS, ConfigError, combo_key, load_suite, parse_combo_key
from cvs_tasks.config.sweep import build_combos

BASE = {"model_name": "llama3.1_8B", "training_iterations": "5", "tensor_parallelism": "2"}


def combos_of(sweep, train_params=BASE):
    combos, problems = build_combos(sweep, train_params)
    return combos, dict(problems)


def test_key_grammar_round_trips():
    assert parse_combo_key(FP8) == ("4", "128", "FP8")
    assert combo_key("4", "128", "FP8") == FP8
    assert parse_combo_key("MBS=4, GBS=128, PRECISION=FP8") is None
    assert parse_combo_key("GBS=128,MBS=4,PRECISION=FP8") is None


def test_overlay_merge_order_train_params_then_body_then_key_then_defaults():
    sweep = {"combinations": {FP8: {"training_iterations": "20", "tensor_parallelism": 4, "name": "fp8"}}}
    (combo,), problems = combos_of(sweep)
    assert problems == {}
    assert (combo.id, combo.cell, combo.mbs, combo.gbs, combo.precision) == (FP8, FP8, "4", "128", "FP8")
    params = combo.train_params
    assert params["training_iterations"] == "20"          # body wins over train_params
    assert params["tensor_parallelism"] == "4"            # numbers become text
    assert params["micro_batch_size"] == "4" and params["precision"] == "FP8"   # forced from the key
    assert params["sequence_length"] == TRAIN_PARAM_DEFAULTS["sequence_length"]  # default filled
    assert params["model_name"] == "llama3.1_8B"
    assert "name" not in params


def test_body_may_repeat_the_key_values_but_not_contradict_them():
    sweep = {"combinations": {FP8: {"micro_batch_size": "4", "precision": "BF16"}}}
    combos, problems = combos_of(sweep)
    assert combos == []
    message = problems[f'sweep.combinations["{FP8}"].precision']
    assert "is 'BF16' but the key sets 'FP8'" in message


def test_malformed_key_is_named_with_the_expected_shape():
    combos, problems = combos_of({"combinations": {"mbs4-fp8": {}}, "runs": ["mbs4-fp8"]})
    assert combos == []
    assert "MBS=<micro batch>,GBS=<global batch>,PRECISION=<precision>" in problems["sweep.combinations.mbs4-fp8"]


def test_mbs_and_gbs_in_the_key_must_be_positive_integers():
    _, problems = build_combos({"combinations": {"MBS=x,GBS=0,PRECISION=FP8": {}}}, BASE)
    where = 'sweep.combinations["MBS=x,GBS=0,PRECISION=FP8"]'
    assert problems == [(where, "MBS in the key must be a positive integer in ASCII digits 0-9 (got 'x')"),
                        (where, "GBS in the key must be a positive integer in ASCII digits 0-9 (got '0')")]


def test_runs_must_be_known_and_listed_once():
    sweep = {"combinations": {FP8: {}, BF16: {}}, "runs": [FP8, "MBS=4,GBS=128,PRECISION=FP9", FP8]}
    combos, problems = combos_of(sweep)
    assert [c.id for c in combos] == [FP8]
    assert "is not in sweep.combinations (did you mean" in problems["sweep.runs[1]"]
    assert "known: " + FP8 in problems["sweep.runs[1]"]
    assert "repeats sweep.runs[0]" in problems["sweep.runs[2]"]


def test_runs_order_is_kept_and_absent_runs_means_all_in_file_order():
    combos, _ = combos_of({"combinations": {FP8: {}, BF16: {}}, "runs": [BF16, FP8]})
    assert [c.id for c in combos] == [BF16, FP8]
    combos, _ = combos_of({"combinations": {FP8: {}, BF16: {}}})
    assert [c.id for c in combos] == [FP8, BF16]


def test_empty_runs_with_combinations_is_an_error():
    _, problems = combos_of({"combinations": {FP8: {}}, "runs": []})
    assert problems["sweep.runs"].startswith("is empty")


def test_implicit_default_combo_takes_sizes_from_train_params():
    params = {**BASE, "micro_batch_size": "2", "global_batch_size": 64, "precision": "BF16"}
    (combo,), problems = combos_of(None, params)
    assert problems == {}
    assert (combo.id, combo.cell, combo.mbs, combo.gbs, combo.precision) == ("default", "default", "2", "64", "BF16")


def test_implicit_default_combo_requires_the_three_sizes_and_says_why():
    combos, problems = combos_of({"combinations": {}}, {**BASE, "precision": "BF16"})
    assert combos == []
    assert set(problems) == {"train_params.micro_batch_size", "train_params.global_batch_size"}
    assert "implicit 'default' combo" in problems["train_params.micro_batch_size"]


def test_runs_without_combinations_is_reported():
    _, problems = combos_of({"runs": [FP8]}, {**BASE, "micro_batch_size": "1", "global_batch_size": "8",
                                             "precision": "BF16"})
    assert "sweep.combinations is empty" in problems["sweep.runs"]


def test_model_name_is_required_and_cannot_vary_per_combo():
    _, problems = combos_of({"combinations": {FP8: {"model_name": "other"}}}, {"training_iterations": "5"})
    assert "required" in problems["train_params.model_name"]
    assert "set it once in train_params" in problems[f'sweep.combinations["{FP8}"].model_name']


def test_train_params_values_must_be_text_or_numbers():
    _, problems = combos_of({"combinations": {FP8: {"recompute": True}}}, {**BASE, "extra": [1]})
    assert "must be a string or a number" in problems["train_params.extra"]
    assert "must be a string or a number" in problems[f'sweep.combinations["{FP8}"].recompute']


@pytest.mark.parametrize("iterations", ["0", "ten", "-5"])
def test_training_iterations_must_be_a_positive_whole_number(iterations):
    _, problems = combos_of({"combinations": {FP8: {"training_iterations": iterations}}})
    assert "positive whole number" in problems[f'sweep.combinations["{FP8}"].training_iterations']


def test_combo_body_must_be_an_object():
    _, problems = combos_of({"combinations": {FP8: "20"}})
    assert "overlays" in problems[f'sweep.combinations["{FP8}"]']


def test_default_cell_needs_a_default_threshold_cell_when_enforcing(suite_files):
    config = minimal_config()
    del config["sweep"]
    config["train_params"].update(micro_batch_size="1", global_batch_size="8", precision="BF16")
    with pytest.raises(ConfigError) as info:
        load_suite(suite_files(config))
    problems = dict(info.value.problems)
    assert problems["default"].startswith("missing")
    assert "matches no combo" in problems[f'["{FP8}"]']
    thresholds = {"default": {"training.throughput_per_gpu": {"kind": "min", "value": 1}}}
    suite = load_suite(suite_files(config, thresholds))
    assert [c.id for c in suite.combos] == ["default"]
