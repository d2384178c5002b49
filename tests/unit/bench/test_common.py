from benchmarks.common import MISS, PASS, at_least, at_most, median, not_measured, row


def test_at_most_passes_within_and_says_by_how_much_when_over():
    assert at_most("x", 1.0, 2.0, "s")["status"] == PASS
    over = at_most("x", 3.0, 2.0, "s", "context")
    assert over["status"] == MISS
    assert over["target"] == "<= 2"
    assert over["detail"] == "context; missed by 50% (over the target)"


def test_at_least_misses_below_target():
    under = at_least("mb", 100.0, 200.0, "MB/s")
    assert under["status"] == MISS and "missed by 50% (under the target)" in under["detail"]
    assert at_least("mb", 250.0, 200.0, "MB/s")["status"] == PASS


def test_unmeasured_figure_is_a_miss_with_the_reason():
    r = not_measured("fanout", "x", "<= 2", "no testbed")
    assert r == {"name": "fanout", "value": None, "unit": "x", "target": "<= 2", "status": MISS,
                 "detail": "not measured: no testbed"}
    assert row("a", 1.23456, "s", "t", None)["status"] == MISS


def test_median():
    assert median([]) is None
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
