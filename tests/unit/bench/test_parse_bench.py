"""The parse bench compares like with like: both parsers read the same finished log and agree."""

import pytest

from benchmarks import parse_bench, reference_parse
from cvs_tasks.metrics import parse_file


@pytest.mark.parametrize("dialect", ["megatron", "primus"])
def test_generated_log_is_a_finished_run_both_parsers_read(tmp_path, dialect):
    path = tmp_path / "training.log"
    lines = parse_bench.write_log(path, 0.5, dialect=dialect)
    ours = parse_file(path, seq_length=8192, world_size=8)
    assert ours.completed and ours.planned == ours.last_step
    assert ours.iterations_parsed == (lines if dialect == "megatron" else lines // 2)
    ref = reference_parse.parse(path, ours.planned)
    assert ref["complete"] and ref["errors"] == [] and not ref["nan"]
    ms = float(ref["results"]["elapsed_time_per_iteration"][-1])
    assert ms == pytest.approx(ours.metrics()["training.elapsed_time_per_iteration"], rel=0.01)


def test_bench_figures_include_the_reference_and_memory_per_gb():
    figures = parse_bench.run(size_mb=2)
    assert figures["speedup_vs_reference_cpu"] > 0 and figures["reference_cpu_s"] > 0
    assert figures["iterations_parsed"] == figures["lines"]
    assert "rss_growth_mb_per_gb" in figures
