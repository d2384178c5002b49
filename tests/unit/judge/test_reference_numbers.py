"""The reference's (ROCm CVS) aggregation of the run metrics, recorded next to ours."""

from __future__ import annotations

from pathlib import Path

import pytest

from cvs_tasks.judge.kinds import evaluate, unit_for
from cvs_tasks.judge.reference import SUFFIX, reference_numbers, with_reference_rows
from cvs_tasks.metrics import Iteration, parse_file

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


def it(step, ms, tf=None, mem=None, tf_avg=None, ms_avg=None, tok_avg=None):
    return Iteration(step, 20, ms, tf, tf_avg, None, tok_avg, None, 2.0, None, 0, 0, mem, None,
                     elapsed_avg_ms=ms_avg)


def test_megatron_uses_the_launcher_summary_lines_as_the_reference_does():
    parser = parse_file(LOGS / "megatron_rocm_fork.log")
    ref = reference_numbers(list(parser.iterations.values()), parser.facts.launcher_summary, "megatron")
    assert ref["training.throughput_per_gpu"] == {"value": 429.4, "how": "launcher summary line 'throughput per GPU:'"}
    assert ref["training.elapsed_time_per_iteration"]["value"] == 17671.55
    assert ref["training.tokens_per_gpu"]["value"] == 7416.7
    assert ref["training.mem_usage"]["value"] == 0.8731


def test_megatron_without_summary_lines_takes_the_mean_after_step_one():
    steps = [it(1, 9000.0, 100.0, 0.5), it(2, 1000.0, 400.0, 0.6), it(3, 1100.0, 380.0, 0.7)]
    ref = reference_numbers(steps, {}, "megatron")
    assert ref["training.throughput_per_gpu"]["value"] == pytest.approx(390.0)
    assert ref["training.elapsed_time_per_iteration"]["value"] == pytest.approx(1050.0)
    assert ref["training.mem_usage"]["value"] == pytest.approx(0.65)
    assert "after the first" in ref["training.throughput_per_gpu"]["how"]
    assert ref["training.tokens_per_gpu"]["value"] is None  # Megatron prints no tokens/s per step


def test_primus_takes_the_running_average_of_the_last_step_and_has_no_mem_usage():
    parser = parse_file(LOGS / "primus_b3.log")
    ref = reference_numbers(list(parser.iterations.values()), parser.facts.launcher_summary, "primus")
    assert ref["training.throughput_per_gpu"]["value"] == 480.5
    assert ref["training.tokens_per_gpu"]["value"] == 9400.0
    assert ref["training.elapsed_time_per_iteration"]["value"] == 13900.0
    assert ref["training.mem_usage"] == {"value": None, "how": "the reference reports no mem_usage for Primus"}
    early = reference_numbers([it(1, 8146.7, 103.7), it(2, 900.0, 950.0)], {}, "primus")
    assert early["training.throughput_per_gpu"] == {"value": 950.0, "how": "value of the last step (no X/Y pair)"}


def test_rows_sit_next_to_ours_as_record_rows_with_the_difference():
    actuals = {"training.throughput_per_gpu": 400.0, "training.mem_usage": 0.5}
    rows = evaluate(actuals, {}, True)
    ref = {"training.throughput_per_gpu": {"value": 420.0, "how": "launcher summary line"},
           "training.mem_usage": {"value": None, "how": "the reference reports no mem_usage for Primus"}}
    out = with_reference_rows(rows, ref, unit_for)
    assert [r.name for r in out] == ["training.throughput_per_gpu", "training.throughput_per_gpu" + SUFFIX,
                                     "training.mem_usage", "training.mem_usage" + SUFFIX]
    added = out[1]
    assert (added.value, added.unit, added.status) == (420.0, "TFLOP/s/GPU", "RECORD")
    assert "+5.0 % vs ours" in added.reason and out[3].value is None
    assert with_reference_rows(rows, None, unit_for) == rows
