"""Adding a metric is one catalog row: a throw-away row (the mean loss of the steady-state steps,
read from the ``lm loss`` label every Megatron dialect prints) reaches the parser, config
validation, judging, the report, the baseline's direction and calibration with nothing else changed."""

from __future__ import annotations

import pytest
from judged_run import BF16, FP8, LOG, judged_demo_run, report_row, threshold_file

from cvs_tasks.config.templates import annotated_toml
from cvs_tasks.config.thresholds import load_threshold_file
from cvs_tasks.history.baseline import BaselineSettings, judge
from cvs_tasks.history.calibrate import calibrated_file
from cvs_tasks.metrics import catalog
from cvs_tasks.metrics.parser import parse_file

NAME = "training.lm_loss_mean"
ROW = catalog.Metric(NAME, "nats", "Mean language-model loss of the steady-state steps.", catalog.LOWER,
                     field="loss", statistic=catalog.MEAN, positive_only=False, calibrate=True)


@pytest.fixture
def one_more_metric(monkeypatch):
    monkeypatch.setattr(catalog, "METRICS", catalog.METRICS + (ROW,))


def steady_mean_loss() -> float:
    parser = parse_file(LOG)
    losses = [it.loss for step, it in parser.iterations.items() if step > parser.warmup_cutoff]
    assert len(losses) == 9  # 10 steps, the first is warm-up
    return sum(losses) / len(losses)


def test_without_the_row_the_name_is_unknown_and_never_produced(tmp_path):
    path = threshold_file(tmp_path, {BF16: {NAME: {"kind": "max", "value": 20}}})
    _, _, problems, warnings = load_threshold_file(path)
    assert problems == [] and any(NAME in w and "not a metric the harness produces" in w for w in warnings)
    assert NAME not in parse_file(LOG).metrics()


def test_the_parser_computes_it_after_the_metrics_it_had(one_more_metric):
    metrics = parse_file(LOG).metrics()
    assert metrics[NAME] == pytest.approx(steady_mean_loss())
    assert list(metrics)[-1] == NAME and metrics["training.throughput_per_gpu"] is not None


def test_config_validation_knows_it_and_still_refuses_near_misses(tmp_path, one_more_metric):
    path = threshold_file(tmp_path, {BF16: {NAME: {"kind": "max", "value": 20, "unit": "nats"},
                                            "training.lm_loss_men": {"kind": "max", "value": 20},
                                            "lm_loss_mean": {"kind": "max", "value": 20}},
                                     FP8: {NAME: {"kind": "max", "value": 20, "unit": "ms"}}})
    cells, _, problems, warnings = load_threshold_file(path)
    assert cells[BF16][NAME].value == 20
    assert [w for w in warnings if "lm_loss" in w] == [
        f'{path}: ["{BF16}"]["training.lm_loss_men"]: not a metric the harness produces '
        f"(did you mean '{NAME}'?); it will only ever be missing"]
    found = dict(problems)
    assert found[f'["{BF16}"].lm_loss_mean'] == f"metric names start with 'training.' (did you mean '{NAME}'?)"
    assert found[f'["{FP8}"]["{NAME}"].unit'] == f"{NAME} is in nats, not ms: state the metric's unit"
    assert "# Mean language-model loss of the steady-state steps." in annotated_toml(
        {BF16: {NAME: {"kind": "max", "value": 20}}}, "threshold")


def test_it_is_judged_and_reported_with_its_unit(tmp_path, one_more_metric):
    mean = steady_mean_loss()
    results, records, html = judged_demo_run(tmp_path, {BF16: {NAME: {"kind": "max", "value": 11}},
                                                        FP8: {NAME: {"kind": "max", "value": 10}}})
    passed, failed = report_row(results, BF16, NAME), report_row(results, FP8, NAME)
    assert (passed["status"], passed["unit"], passed["expected"]) == ("PASS", "nats", "<= 11")
    assert passed["value"] == pytest.approx(mean) and 10 < mean < 11
    assert failed["status"] == "FAIL" and failed["reason"] == f"{NAME}: {mean:.6g} is above the maximum 10"
    assert NAME in records[FP8].reason
    assert "lm_loss_mean" in html and "nats" in html


def test_the_baseline_and_calibration_follow_its_direction(one_more_metric):
    history = [(f"r{i}", 10.0) for i in range(3)]
    assert judge(NAME, 10.9, history, BaselineSettings(5)).status == "FAIL"  # lower is better: above the band
    assert judge(NAME, 5.0, history, BaselineSettings(5)).status == "PASS"
    runs = [{"run_id": f"r{i}", "started": i, "metrics": {BF16: {NAME: 10.0}}} for i in range(3)]
    assert calibrated_file(runs)[BF16][NAME] == {"kind": "max", "value": 10.5}
