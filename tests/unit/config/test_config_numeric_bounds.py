"""Time and interval fields are finite and within sane bounds, refused at load with file and field:
`watch.poll_interval_s: 1e308` used to pass `config.validate` and then crash the training stage."""

from __future__ import annotations

import pytest
from config_helpers import FP8, minimal_config, minimal_thresholds

from cvs_tasks.config import ConfigError, ThresholdSpec, load_suite


@pytest.mark.parametrize("block, field, value, words", [
    ("watch", "poll_interval_s", 1e308, "less than or equal to 3600"),
    ("watch", "poll_interval_s", 0, "greater than or equal to 0.01"),
    ("watch", "poll_interval_s", -1, "greater than or equal to 0.01"),
    ("watch", "stall_timeout_s", 1e12, "less than or equal to 604800"),
    ("watch", "stall_timeout_s", 0, "greater than 0"),
    ("watch", "startup_timeout_s", 1e308, "less than or equal to 604800"),
    ("watch", "timeout_s", 1e308, "less than or equal to 2592000"),
    ("watch", "timeout_s", -5, "greater than or equal to 0"),
    ("loss_curve", "sample_every", 10**20, "less than or equal to 1000000000"),
    ("checkpoint", "save_interval", 10**20, "less than or equal to 1000000000"),
])
def test_an_out_of_range_time_or_interval_is_refused_with_file_and_field(suite_files, block, field, value, words):
    path = suite_files(minimal_config(**{block: {field: value}}))
    with pytest.raises(ConfigError) as caught:
        load_suite(path)
    assert caught.value.file == path
    assert [(where, words in message) for where, message in caught.value.problems] == [(f"{block}.{field}", True)]


def test_the_bounds_themselves_are_accepted(suite_files):
    watch = {"poll_interval_s": 3600, "stall_timeout_s": 604800, "startup_timeout_s": 0.5, "timeout_s": 2592000}
    suite = load_suite(suite_files(minimal_config(watch=watch)))
    assert suite.config.watch.poll_interval_s == 3600 and suite.config.watch.timeout_s == 2592000


@pytest.mark.parametrize("field", ["runs", "min_runs"])
def test_a_baseline_reads_at_most_a_thousand_runs(field):
    with pytest.raises(ValueError, match="less than or equal to 1000"):
        ThresholdSpec(kind="baseline", tolerance_pct=10, **{field: 10**29})


def test_a_baseline_count_out_of_range_names_the_threshold_cell(suite_files, tmp_path):
    thresholds = minimal_thresholds()
    thresholds[FP8]["training.throughput_per_gpu"] = {"kind": "baseline", "tolerance_pct": 10, "runs": 10**12}
    with pytest.raises(ConfigError) as caught:
        load_suite(suite_files(thresholds=thresholds))
    assert [f for f, _ in caught.value.groups] == [tmp_path / "thr.json"]
    assert any("runs" in where and "1000" in message for where, message in caught.value.problems)
