"""The follow contract's one pure rule: a consumer takes each log byte once, at its offset."""

from cvs_tasks.remote.follow import Delta, take


def test_a_delta_at_the_held_offset_is_taken_whole():
    assert take(10, Delta(0, 10, b"abc")) == b"abc"


def test_the_part_already_held_is_not_taken_twice():
    assert take(12, Delta(0, 10, b"abcde")) == b"cde"


def test_a_delta_wholly_held_gives_nothing():
    assert take(15, Delta(0, 10, b"abcde")) == b""


def test_a_delta_past_the_held_offset_is_a_gap_and_gives_nothing():
    assert take(10, Delta(0, 11, b"bcd")) == b""
    assert Delta(0, 11, b"bcd").end == 14
