from benchmarks.common import (
    MISS,
    PASS,
    at_least,
    at_most,
    least_cpu_seconds,
    median,
    not_measured,
    ratio,
    reported,
    row,
)


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


def test_a_reported_figure_has_no_target_and_never_misses():
    r = reported("report.render_s[64x16]", 3.2, "s", "was <= 2 s")
    assert (r["target"], r["status"], r["value"]) == ("reported", PASS, 3.2)


def test_a_ratio_needs_both_figures_and_a_positive_reference():
    assert ratio(3.0, 1.5) == 2.0
    assert ratio(None, 1.0) is None and ratio(1.0, None) is None and ratio(1.0, 0.0) is None


def test_the_least_cpu_of_the_passes_is_taken():
    costs = iter([0.05, 0.01, 0.03])

    def burn():
        import time

        until = time.process_time() + next(costs)
        while time.process_time() < until:
            pass

    spent = least_cpu_seconds(burn, passes=3)
    assert 0.01 <= spent < 0.03
