"""Feeding a log in any pieces gives exactly the whole-file result; garbage never crashes."""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cvs_tasks.metrics.parser as parser_module
from cvs_tasks.metrics import LogParser, parse_file

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"

LOGS = sorted(p.name for p in FIXTURES.glob("*.log"))


def snapshot(parser: LogParser) -> tuple:
    return (parser.summary(), [it for it in parser.iterations.values()], parser.lines_skipped)


def parse_pieces(text: str, cuts: list[int]) -> LogParser:
    parser = LogParser()
    prev = 0
    for cut in sorted(set(cuts)) + [len(text)]:
        parser.feed(text[prev:cut])
        prev = cut
    parser.finish()
    return parser


def whole(text: str) -> LogParser:
    parser = LogParser()
    parser.feed(text)
    parser.finish()
    return parser


@pytest.mark.parametrize("name", LOGS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_split_points_give_the_whole_file_result(name, data):
    text = (FIXTURES / name).read_text()
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=12))
    assert snapshot(parse_pieces(text, cuts)) == snapshot(whole(text))


@pytest.mark.parametrize("name", LOGS)
def test_one_character_at_a_time(name):
    text = (FIXTURES / name).read_text()[:6000]
    assert snapshot(parse_pieces(text, list(range(len(text))))) == snapshot(whole(text))


@pytest.mark.parametrize("name", LOGS)
def test_small_windows_agree_with_one_window(name, monkeypatch):
    text = (FIXTURES / name).read_text()
    expected = snapshot(whole(text))
    monkeypatch.setattr(parser_module, "WINDOW", 700)
    assert snapshot(whole(text)) == expected


def test_file_reader_chunks_agree_with_whole_text(tmp_path: Path):
    text = (FIXTURES / "primus_b2.log").read_text() + "caf\u00e9 \u2603 end\n"
    path = tmp_path / "t.log"
    path.write_text(text, encoding="utf-8")
    assert snapshot(parse_file(path, chunk_bytes=7)) == snapshot(whole(text))


def test_feed_returns_only_the_new_complete_lines(fixture_log):
    lines = fixture_log("megatron_upstream_seconds.log").read_text().splitlines(keepends=True)
    it_lines = [l for l in lines if "iteration " in l and "elapsed" in l]
    parser = LogParser()
    first = parser.feed(it_lines[0] + it_lines[1][:50])
    assert [it.step for it in first] == [1]
    second = parser.feed(it_lines[1][50:])
    assert [it.step for it in second] == [2]
    assert list(parser.finish()) == []


@given(st.binary(max_size=3000))
@settings(max_examples=60, deadline=None)
def test_garbage_bytes_never_crash(blob):
    parser = LogParser()
    parser.feed(blob.decode("utf-8", errors="replace"))
    parser.finish()
    parser.summary()


def test_bad_bytes_and_broken_iteration_lines_are_counted(fixture_log):
    good = fixture_log("megatron_upstream_seconds.log").read_bytes()
    broken = (b"\xff\xfe\x00garbage\n"
              b" [2025-06-12 09:14:03] iteration 3/20 | elapsed time per iteration (ms) |\n")
    parser = LogParser()
    parser.feed((good + broken).decode("utf-8", errors="replace"))
    parser.finish()
    assert parser.lines_skipped == 2
    assert len(parser.iterations) == 20


def test_line_without_trailing_newline_is_read_at_finish(fixture_log):
    text = fixture_log("megatron_upstream_seconds.log").read_text()
    last_iteration = text[: text.rfind("[after training is done]")].rstrip("\n")
    parser = LogParser()
    parser.feed(last_iteration)
    assert parser.last_step == 19
    parser.finish()
    assert parser.last_step == 20
