"""Long logs: bounded retention, exact folded run metrics, the lean pass and the bytes entry point.

A small ``RETAIN`` makes a few thousand generated lines behave like a multi-gigabyte log; every
result is compared with the same log parsed with retention off (every row kept).
"""

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cvs_tasks.metrics.parser as parser_module
from cvs_tasks.metrics import LogParser, aggregate, parse_file, retention
from cvs_tasks.metrics.uniform import lean_regex, learn_shape

LINE = (" [2026-03-06 {hh:02d}:{mm:02d}:{ss:09.6f}] iteration {step:>8d}/{total:>8d} | consumed samples: "
        "{consumed:>12d} | elapsed time per iteration (ms): {ms:.1f} | mem usages: {mem:.4f} | "
        "throughput per GPU (TFLOP/s/GPU): {tf:.1f} | learning rate: 1.500000E-05 | global batch size: "
        "{gbs:>5d} | lm loss: {loss} | loss scale: 1.0 | grad norm: {gn:.3f} | "
        "number of skipped iterations: {skip:>3d} | number of nan iterations: {nan:>3d} |\n")
HEADER = "    seq_length ...................................... 8192\n    world_size ...... 8\n"


def iteration_line(step: int, total: int, rng: random.Random, loss: str | None = None,
                   nan: int = 0, skip: int = 0, gbs: int = 128) -> str:
    ms = 13800.0 + rng.uniform(-150, 150)
    clock = step * 13.8
    return LINE.format(hh=int(clock // 3600) % 24, mm=int(clock // 60) % 60, ss=clock % 60, step=step,
                       total=total, consumed=step * gbs, ms=ms, mem=0.87 + rng.uniform(-0.01, 0.01),
                       tf=488.3 * 13800.0 / ms, gbs=gbs, gn=1.0 + rng.random(), skip=skip, nan=nan,
                       loss=loss or f"{2.0 + 10.0 / (1 + step / 500):.6E}")


def long_log(n: int = 4000, seed: int = 3, extras: bool = True) -> str:
    """``n`` iterations with, when ``extras``, errors, a NaN line and a skipped step in the thinned part."""
    rng = random.Random(seed)
    lines = [HEADER]
    for step in range(1, n + 1):
        if extras and step == n // 2:
            lines.append("[rank3]: NCCL WARN Call to connect returned Connection refused, retrying\n")
        if extras and step == 3 * n // 4:
            lines.append(iteration_line(step, n, rng, loss="nan", nan=1))
            continue
        if extras and step == 3 * n // 4 + 7:
            lines.append(iteration_line(step, n, rng, skip=1))
            continue
        lines.append(iteration_line(step, n, rng))
        if extras and step == n // 3:
            lines.append(" [after training is done] validation loss at iteration 1000 | lm loss value: 3.5 |\n")
    return "".join(lines)


def parse(text: str, pieces: int = 1, seed: int = 0) -> LogParser:
    parser = LogParser()
    cuts = sorted(random.Random(seed).sample(range(len(text)), pieces - 1)) if pieces > 1 else []
    prev = 0
    for cut in cuts + [len(text)]:
        parser.feed(text[prev:cut])
        prev = cut
    parser.finish()
    return parser


@pytest.fixture
def small_retain(monkeypatch):
    monkeypatch.setattr(retention, "RETAIN", 400)
    monkeypatch.setattr(parser_module, "WINDOW", 20_000)


def full_parse(text: str, monkeypatch) -> LogParser:
    with monkeypatch.context() as m:
        m.setattr(retention, "RETAIN", 10**9)
        return parse(text)


def assert_same_run(thin: LogParser, full: LogParser) -> None:
    got, want = thin.metrics(), full.metrics()
    assert set(got) == set(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-12), key
    assert got["training.step_time_p50_ms"] == want["training.step_time_p50_ms"]  # exact, not a sketch
    assert got["training.step_time_p95_ms"] == want["training.step_time_p95_ms"]
    assert thin.metrics_exact
    a, b = thin.summary(), full.summary()
    for key in ("dialect", "flavour", "timestamps", "iterations", "planned_iterations", "completed",
                "warmup_cutoff", "loss", "eval_losses", "lines", "lines_skipped", "errors", "fatal",
                "iterations_parsed"):
        assert a[key] == b[key], key
    for step, it in thin.iterations.items():
        assert it == full.iterations[step]


def test_thinned_parse_keeps_metrics_errors_and_kept_rows_exact(small_retain, monkeypatch):
    text = long_log()
    thin, full = parse(text), full_parse(text, monkeypatch)
    assert len(full.iterations) == 4000 and full.summary()["iterations_kept"] == 4000
    assert len(thin.iterations) <= retention.RETAIN and thin.iterations_parsed == 4000
    assert_same_run(thin, full)
    assert {e.name for e in thin.errors} >= {"nccl_warning", "nan_iterations", "skipped_iterations"}
    assert thin.last_step in thin.iterations and 1 in thin.iterations


def test_retention_rule_keeps_multiples_of_the_stride_plus_first_and_last(small_retain):
    parser = parse(long_log(extras=False))
    steps = list(parser.iterations)
    stride = parser._stride
    assert stride >= 2 and steps[0] == 1 and steps[-1] == 4000
    assert retention.RETAIN // 4 <= len(steps) <= retention.RETAIN
    regular = [s for s in steps[1:-1] if s % stride]
    assert len(regular) < len(steps) // 10  # only window ends and rows from the careful path


def test_realistic_runs_are_never_thinned():
    parser = parse(long_log(n=3000, extras=False))
    assert list(parser.iterations) == list(range(1, 3001)) and parser.metrics_exact


@pytest.mark.parametrize("pieces", [2, 9, 40])
def test_any_feed_pieces_give_the_same_thinned_result(small_retain, monkeypatch, pieces):
    text = long_log()
    assert_same_run(parse(text, pieces=pieces, seed=pieces), full_parse(text, monkeypatch))


def test_lean_pass_is_used_and_agrees_with_the_full_path(small_retain, monkeypatch, window_spy):
    monkeypatch.setattr(parser_module, "NATIVE", False)  # the lean pass is the pure-Python fast path
    text = long_log()
    calls = window_spy("_process_lean")
    lean = parse(text)
    assert any(calls)
    monkeypatch.setattr(parser_module, "LEAN_MIN_STRIDE", 10**9)
    no_lean = parse(text)
    assert_same_run(lean, no_lean)


def test_feed_returns_folded_iterations_read_back_from_text(small_retain, monkeypatch):
    text = long_log(extras=False)
    full = full_parse(text, monkeypatch)
    parser = LogParser()
    batches = [parser.feed(text[i:i + 30_000]) for i in range(0, len(text), 30_000)]
    parser.finish()
    steps = [it.step for batch in batches for it in batch]
    assert steps == list(range(1, 4001))
    assert [it for batch in batches[-3:] for it in batch] == [
        full.iterations[s] for s in range(steps[-sum(len(b) for b in batches[-3:])], 4001)]


def test_feed_bytes_and_parse_file_agree_with_text(small_retain, tmp_path, monkeypatch):
    text = long_log() + "caf\u00e9 \u2603 end\n"
    raw = text.encode("utf-8")
    path = tmp_path / "train.log"
    path.write_bytes(raw)
    by_file = parse_file(path, chunk_bytes=12_345)
    assert_same_run(by_file, full_parse(text, monkeypatch))
    parser = LogParser()
    for i in range(0, len(raw), 7_777):  # cuts inside the multi-byte characters too
        parser.feed_bytes(raw[i:i + 7_777])
    parser.finish()
    a, b = parser.summary(), by_file.summary()
    assert a.pop("metrics") == pytest.approx(b.pop("metrics"), rel=1e-12)
    assert a.pop("tflops_recomputed") == pytest.approx(b.pop("tflops_recomputed"), rel=1e-12)
    a.pop("iterations_kept"), b.pop("iterations_kept")  # each window keeps its last row
    assert a == b


def test_mixing_feed_and_feed_bytes_mid_line_is_refused():
    parser = LogParser()
    parser.feed_bytes(b" [2026-03-06 00:00:01] iteration 1/")
    with pytest.raises(RuntimeError, match="one of them"):
        parser.feed("2 |\n")


def test_relogged_folded_step_makes_metrics_inexact(small_retain):
    text = long_log(extras=False)
    restart = text[text.index(" [", text.index("iteration     1000/") - 40):]  # steps 1000.. again
    parser = parse(text + restart)
    assert not parser.metrics_exact and not parser.summary()["metrics_exact"]


def test_planned_count_change_across_folded_steps_makes_metrics_inexact(small_retain):
    rng = random.Random(5)
    text = "".join(iteration_line(s, 4000, rng) for s in range(1, 3001))
    text += "".join(iteration_line(s, 20000, rng) for s in range(3001, 3200))  # cutoff 400 -> 2000
    parser = parse(text)
    assert parser.warmup_cutoff == 2000 and not parser.metrics_exact


def test_lean_regex_leaves_lines_that_need_checks_unmatched():
    rng = random.Random(1)
    line = iteration_line(5, 10, rng)
    rx = lean_regex(line[:-1], learn_shape(line[:-1]))
    assert rx is not None and rx.fullmatch(line)
    for bad in (iteration_line(5, 10, rng, loss="nan"), iteration_line(5, 10, rng, nan=1),
                iteration_line(5, 10, rng, skip=2), iteration_line(5, 10, rng, gbs=256),
                line.replace("grad norm: ", "grad norm: inf"), line.replace("[2026", "[rank0] [2026")):
        assert rx.fullmatch(bad) is None, bad


@given(st.lists(st.integers(1, 60), min_size=1, max_size=80), st.floats(0, 100))
@settings(max_examples=80, deadline=None)
def test_percentile_of_counts_matches_percentile_of_the_expanded_values(values, q):
    counts = {}
    for v in values:
        counts[float(v)] = counts.get(float(v), 0) + 1
    got = aggregate.percentile_of_counts(sorted(counts.items()), len(values), q)
    assert got == pytest.approx(aggregate.percentile(sorted(map(float, values)), q))


def test_folded_sums_skip_unusable_values_like_run_metrics():
    folded = retention.Folded()
    elapsed = ["100.0", "nan", "-5", "200.0", "inf"]
    tflops = ["10.0", "0", "20.0", "nan", "40.0"]
    folded.add([11, 12, 13, 14, 15], 10, elapsed, tflops, None, ["0.5", "nan", "0.7", "0.9", "1.1"],
               128, None)
    got = aggregate.merged_run_metrics([], [], [], [], folded, 8 / (4096 * 1000.0))
    want = aggregate.run_metrics([100.0, math.nan, -5.0, 200.0, math.inf], [10.0, 0.0, 20.0, math.nan, 40.0],
                                 [128 * 4096 * 1000.0 / (ms * 8) for ms in (100.0, 200.0)],
                                 [0.5, math.nan, 0.7, 0.9, 1.1])
    assert got == pytest.approx(want)
