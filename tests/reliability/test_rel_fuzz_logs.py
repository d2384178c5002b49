"""Hostile input to the log parser: arbitrary text, arbitrary bytes (binary, invalid UTF-8) decoded
the ways the harness decodes them, 1 MB lines, lines cut at any byte across feeds, and interleaved
ranks. The parser never raises; garbage is skipped and counted; the real iterations are kept."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from cvs_tasks.metrics import LogParser

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
CLEAN = (LOGS / "megatron_rocm_fork.log").read_text()
FUZZ = settings(max_examples=120, deadline=None)


def parse(chunks) -> LogParser:
    parser = LogParser()
    for chunk in chunks:
        parser.feed(chunk)
    parser.finish()
    json.dumps(parser.summary(), default=str)  # the `logs.parse --json` object always serialises
    parser.metrics()
    parser.new_errors()
    return parser


def steps(parser: LogParser) -> dict:
    return {s: (it.loss, it.elapsed_ms) for s, it in parser.iterations.items()}


CLEAN_STEPS = steps(parse([CLEAN]))


def test_the_clean_fixture_has_iterations():
    assert len(CLEAN_STEPS) >= 5


@FUZZ
@given(st.lists(st.text(max_size=500), max_size=20))
def test_arbitrary_text_never_raises(chunks):
    parse(chunks)


@FUZZ
@given(st.lists(st.binary(max_size=800), max_size=10), st.sampled_from(["replace", "surrogateescape", "latin-1"]))
def test_arbitrary_bytes_never_raise(chunks, how):
    decoded = [c.decode("latin-1") if how == "latin-1" else c.decode("utf-8", how) for c in chunks]
    parse(decoded)


@FUZZ
@given(st.lists(st.integers(min_value=0, max_value=len(CLEAN)), max_size=30))
def test_lines_cut_anywhere_across_feeds_give_the_same_iterations(cuts):
    points = sorted(set(cuts))
    pieces = [CLEAN[a:b] for a, b in zip([0, *points], [*points, len(CLEAN)])]
    assert steps(parse(pieces)) == CLEAN_STEPS


@FUZZ
@given(st.lists(st.binary(min_size=1, max_size=200).map(lambda b: b.replace(b"\n", b"") + b"\x00\xff"),
                min_size=1, max_size=15), st.randoms(use_true_random=False))
def test_binary_garbage_lines_are_skipped_counted_and_lose_nothing(garbage, rnd):
    lines = CLEAN.splitlines(keepends=True)
    for g in garbage:
        lines.insert(rnd.randrange(len(lines) + 1), g.decode("utf-8", "replace") + "\n")
    parser = parse(["".join(lines)])
    assert parser.lines_skipped >= len(garbage)
    assert steps(parser) == CLEAN_STEPS


@settings(max_examples=5, deadline=None)
@given(st.sampled_from(["x", "\x00", "iteration 1/ 10 | elapsed time per iteration (ms): ", "\ufffd"]))
def test_one_megabyte_lines_never_raise(fill):
    huge = fill * (1024 * 1024 // len(fill))
    parser = parse([CLEAN[: len(CLEAN) // 2], huge, "\n", huge[: 1000], CLEAN[len(CLEAN) // 2:]])
    assert steps(parser) == CLEAN_STEPS or len(steps(parser)) >= len(CLEAN_STEPS) - 1


@FUZZ
@given(st.lists(st.sampled_from(range(8)), min_size=20, max_size=200), st.integers(min_value=1, max_value=4000))
def test_interleaved_rank_prefixes_and_chunking_never_raise(ranks, size):
    body = CLEAN.splitlines()
    mixed = "\n".join(f"[rank{r}]: {body[i % len(body)]}" for i, r in enumerate(ranks)) + "\n"
    parse([mixed[i:i + size] for i in range(0, len(mixed), size)])
