"""Each dialect and generation parses to the numbers its fixture was written with.

Fixture values (make_fixtures.py): step 1 elapsed 42004.9 ms; later steps 13800 + 100*(step % 3)
ms; TFLOP/s 480 + (step % 2); loss 12 - 0.25*step; GBS 128, seq 8192, 8 GPUs.
"""

import statistics

import pytest

from cvs_tasks.metrics import LogParser, parse_file


def ms(step):
    return 42004.9 if step == 1 else 13800.0 + 100 * (step % 3)


def steady(total):
    return range(max(1, int(0.1 * total)) + 1, total + 1)


def expected_metrics(total, tokens_logged=False):
    steps = list(steady(total))
    times = [ms(s) for s in steps]
    tokens = [128 * 8192 * 1000.0 / (t * 8) for t in times]
    if tokens_logged:
        tokens = [round(t, 1) for t in tokens]
    return {
        "training.elapsed_time_per_iteration": statistics.mean(times),
        "training.throughput_per_gpu": statistics.harmonic_mean([480.0 + s % 2 for s in steps]),
        "training.tokens_per_gpu": statistics.harmonic_mean(tokens),
        "training.step_time_p50_ms": statistics.median(times),
    }


@pytest.mark.parametrize("name, dialect, flavour, stamps", [
    ("megatron_upstream_seconds.log", "megatron", "upstream", "seconds"),
    ("megatron_upstream_microseconds.log", "megatron", "upstream", "microseconds"),
    ("megatron_rocm_fork.log", "megatron", "rocm-fork", "seconds"),
    ("primus_legacy_a.log", "primus", "primus-legacy", None),
    ("primus_b1.log", "primus", "primus-b1", "microseconds"),
    ("primus_b2.log", "primus", "primus-b2", "microseconds"),
    ("primus_b3.log", "primus", "primus-b3", "microseconds"),
])
def test_dialect_and_generation_are_detected(fixture_log, name, dialect, flavour, stamps):
    parser = parse_file(fixture_log(name))
    assert (parser.dialect, parser.flavour, parser.timestamps) == (dialect, flavour, stamps)
    assert parser.completed
    assert parser.lines_skipped == 0
    assert parser.errors == []


@pytest.mark.parametrize("name, total, logged", [
    ("megatron_upstream_seconds.log", 20, False),
    ("megatron_upstream_microseconds.log", 20, False),
    ("primus_legacy_a.log", 20, True),
    ("primus_b1.log", 20, True),
    ("primus_b2.log", 20, True),
    ("primus_b3.log", 20, True),
])
def test_run_metrics_use_steady_state_instantaneous_values(fixture_log, name, total, logged):
    metrics = parse_file(fixture_log(name)).metrics()
    for key, value in expected_metrics(total, logged).items():
        assert metrics[key] == pytest.approx(value, rel=1e-9), key


def test_upstream_iterations_carry_every_field(fixture_log):
    parser = parse_file(fixture_log("megatron_upstream_microseconds.log"))
    assert parser.last_step == 20 and parser.planned == 20 and len(parser.iterations) == 20
    it = parser.iterations[10]
    assert it.elapsed_ms == 13900.0 and it.tflops == 480.0 and it.loss == pytest.approx(9.5)
    assert it.lr == pytest.approx(1.5e-5) and it.grad_norm == 1.5
    assert it.skipped == 0 and it.nan_iters == 0 and it.global_batch_size == 128
    assert it.tokens_per_gpu == pytest.approx(128 * 8192 * 1000 / (13900.0 * 8))  # derived from args
    assert it.timestamp == pytest.approx(1772806920 + 2 * 60 + 20 + 0.01111)  # 14:24:20.011110 UTC
    assert it.mem_ratio is None and it.tflops_avg is None


def test_validation_memory_and_timer_lines_are_not_iterations(fixture_log):
    parser = parse_file(fixture_log("megatron_upstream_microseconds.log"))
    assert sorted(parser.iterations) == list(range(1, 21))
    assert parser.summary()["eval_losses"] == [[10, 9.6123], [20, 7.1]]


def test_arguments_dump_supplies_sizes_and_wins_over_the_values_given(fixture_log):
    """Metrics follow what the trainer says it ran: the asked sizes only fill in a log without a dump."""
    parser = parse_file(fixture_log("megatron_upstream_seconds.log"))
    assert (parser.seq_length, parser.world_size, parser.global_batch_size) == (8192, 8, 128)
    asked = parse_file(fixture_log("megatron_upstream_seconds.log"), seq_length=4096, world_size=16,
                       global_batch_size=256)
    assert (asked.seq_length, asked.world_size, asked.global_batch_size) == (8192, 8, 128)
    assert asked.metrics()["training.tokens_per_gpu"] == pytest.approx(parser.metrics()["training.tokens_per_gpu"])
    text = fixture_log("megatron_upstream_seconds.log").read_text()
    no_dump = LogParser(seq_length=4096, world_size=16)
    no_dump.feed(text.replace("  seq_length ", "  seq_length_unused ").replace("  world_size ", "  world_size_unused "))
    assert (no_dump.seq_length, no_dump.world_size) == (4096, 16)
    assert no_dump.metrics()["training.tokens_per_gpu"] == pytest.approx(
        parser.metrics()["training.tokens_per_gpu"] / 4)


def test_arguments_complete_after_the_end_line(fixture_log):
    text = fixture_log("megatron_upstream_seconds.log").read_text()
    end = text.index("end of arguments")
    parser = LogParser()
    parser.feed(text[:end])
    assert parser.arguments and not parser.arguments_complete
    parser.feed(text[end:])
    assert parser.arguments_complete


def test_no_seq_length_means_no_tokens(fixture_log):
    text = fixture_log("megatron_upstream_seconds.log").read_text()
    text = text.replace("  seq_length ", "  seq_length_unused ")
    parser = LogParser()
    parser.feed(text)
    assert parser.metrics()["training.tokens_per_gpu"] is None
    assert parser.iterations[5].tokens_per_gpu is None


def test_rocm_fork_reads_mem_usages_and_keeps_summary_lines_aside(fixture_log):
    parser = parse_file(fixture_log("megatron_rocm_fork.log"))
    metrics = parser.metrics()
    steady_mem = [0.87 + s / 10000 for s in steady(10)]
    assert metrics["training.mem_usage"] == pytest.approx(statistics.mean(steady_mem))
    # the launcher's own summary (other warm-up rule) is reported, not preferred
    assert parser.summary()["launcher_summary"]["throughput per gpu"] == 429.4
    assert metrics["training.throughput_per_gpu"] != 429.4


def test_rocm_summary_lines_fill_metrics_when_no_iterations_are_left():
    parser = LogParser()
    parser.feed("throughput per GPU: 429.4\nelapsed time per iteration: 17671.55\n"
                "tokens/GPU/s: 7416.7\nmem usages: 0.8731\n")
    assert parser.metrics() == {
        "training.throughput_per_gpu": 429.4, "training.tokens_per_gpu": 7416.7,
        "training.elapsed_time_per_iteration": 17671.55, "training.mem_usage": 0.8731,
        "training.step_time_p50_ms": None, "training.step_time_p95_ms": None,
        "training.lm_loss": None, "training.grad_norm": None}
    assert parser.dialect == "megatron"


def test_primus_pairs_keep_instantaneous_and_backend_average(fixture_log):
    parser = parse_file(fixture_log("primus_b3.log"))
    it = parser.iterations[12]
    assert (it.elapsed_ms, it.elapsed_avg_ms) == (13800.0, 13900.0)
    assert (it.tflops, it.tflops_avg) == (480.0, 480.5)
    assert (it.tokens_per_gpu, it.tokens_avg) == (round(128 * 8192 * 1000 / (13800 * 8), 1), 9400.0)
    assert it.mem_ratio == pytest.approx(0.804)  # hip usage_ratio 80.40 % / 100
    assert parser.iterations[1].tokens_per_gpu == pytest.approx(128 * 8192 * 1000 / (42004.9 * 8))


def test_primus_duplicated_rank_lines_count_once(fixture_log):
    parser = parse_file(fixture_log("primus_b1.log"))
    assert len(parser.iterations) == 20
    assert parser.lines == len(fixture_log("primus_b1.log").read_text().splitlines())


def test_warmup_rule_drops_first_tenth_and_at_least_step_one():
    parser = LogParser(seq_length=8192, world_size=8)
    line = (" [2026-01-01 00:00:00] iteration {s:8d}/{t:8d} | consumed samples: 1 | elapsed time per "
            "iteration (ms): {ms:.1f} | learning rate: 1.0E-05 | global batch size:   128 | lm loss: "
            "1.0E+01 | loss scale: 1.0 | grad norm: 1.0 | number of skipped iterations:   0 | number of "
            "nan iterations:   0 |\n")
    parser.feed("".join(line.format(s=s, t=20, ms=float(s)) for s in range(1, 21)))
    metrics = parser.metrics()
    assert parser.warmup_cutoff == 2
    assert metrics["training.step_time_p50_ms"] == pytest.approx(11.5)  # reference example
    assert metrics["training.step_time_p95_ms"] == pytest.approx(19.15)


def test_tflops_recomputed_uses_current_formula(fixture_log):
    parser = parse_file(fixture_log("megatron_upstream_seconds.log"))
    tokens = parser.metrics()["training.tokens_per_gpu"]
    assert parser.tflops_recomputed() == pytest.approx(tokens * 51.470352384e9 / 1e12)
    assert parse_file(fixture_log("primus_b1.log")).tflops_recomputed() is None  # model unknown
    named = parse_file(fixture_log("primus_b1.log"), model="llama3.1_8B")
    assert named.tflops_recomputed() == pytest.approx(
        named.metrics()["training.tokens_per_gpu"] * 51.470352384e9 / 1e12)


def test_bad_dialect_is_a_user_error():
    from cvs_tasks.errors import BadInput
    with pytest.raises(BadInput):
        LogParser(dialect="jax")
