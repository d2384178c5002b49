"""The metric catalog is the one declaration: its rows agree with the grammar, the parser, the
launcher summary and the roles the rest of the harness reads from it."""

from __future__ import annotations

from pathlib import Path

from cvs_tasks.judge.reference import SUMMARY_LABELS
from cvs_tasks.metrics import catalog, grammar, runstats
from cvs_tasks.metrics.parser import parse_file

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


def test_rows_are_whole_and_unique():
    names = catalog.names()
    assert len(names) == len(set(names)) and all(n.startswith("training.") for n in names)
    for m in catalog.METRICS:
        assert m.unit and m.note and m.better in (catalog.HIGHER, catalog.LOWER, None), m.name
        assert (m.field is None) == (m.statistic is None), m.name
        assert not m.calibrate or m.better is not None, f"{m.name}: calibration needs a direction"


def test_every_line_metric_reads_a_field_the_grammar_fills_with_a_known_statistic():
    filled = {field for field, _ in grammar.LABELS.values()}
    for m in catalog.from_lines():
        assert m.field in filled and m.statistic in catalog.STATISTICS, m.name
    assert set(catalog.STATISTICS) == set(runstats._STATISTICS)


def test_the_parser_reports_the_line_metrics_in_catalog_order():
    assert list(parse_file(LOGS / "megatron_rocm_fork.log").metrics()) == [m.name for m in catalog.from_lines()]


def test_log_labels_per_dialect_come_from_the_grammar():
    assert catalog.log_labels("training.throughput_per_gpu") == {
        "upstream": ("throughput per gpu (tflop/s/gpu)",), "primus": ("compute per gpu (tflop/s/gpu)",),
        "megatron-deepspeed": ("tflops",)}
    assert catalog.log_labels("training.mem_usage") == {
        "rocm-fork": ("mem usages",), "primus": ("hip mem usage/free/total/usage_ratio",)}
    assert catalog.log_labels("training.scaling_efficiency_pct") == {}


def test_the_launcher_summary_labels_are_the_ones_the_log_prints():
    parser = parse_file(LOGS / "megatron_rocm_fork.log")
    assert set(parser.facts.launcher_summary) == set(catalog.summary_labels().values())
    assert SUMMARY_LABELS == catalog.summary_labels()


def test_roles():
    assert catalog.speed_gates() == {"training.throughput_per_gpu", "training.tokens_per_gpu",
                                     "training.tflops_recomputed", "training.elapsed_time_per_iteration",
                                     "training.scaling_efficiency_pct"}
    assert [m.name for m in catalog.METRICS if m.optional] == ["training.mem_usage"]
    assert catalog.unit("training.nope") == "-" and catalog.get("training.nope") is None


def test_every_metric_a_threshold_may_name_has_a_value_to_judge():
    """A name the schema accepts but no record fills would fail every gate on it as 'missing'."""
    from cvs_tasks.lifecycle.gate_stages import actual_metrics
    from cvs_tasks.metrics.parser import parse_file

    parser = parse_file(Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "megatron_rocm_fork.log")
    data = {"metrics": parser.metrics(), "tflops_recomputed": parser.tflops_recomputed(),
            "scaling_efficiency_pct": 91.0, "steps_to_target": 5, "time_to_target_seconds": 12.0}
    actuals = actual_metrics(data)
    assert [name for name in catalog.names() if actuals.get(name) is None] == []
