from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cvs_tasks.report.svg import Series, least_squares, line_chart, nice_ticks, tick_label, trend_series

NS = "{http://www.w3.org/2000/svg}"


def test_nice_ticks_are_round_and_cover_the_range():
    assert nice_ticks(0, 1000) == [0, 250, 500, 750, 1000]
    assert nice_ticks(6.1, 10.9) == [6, 8, 10, 12]
    assert nice_ticks(0.001, 0.0047) == pytest.approx([0.001, 0.002, 0.003, 0.004, 0.005])


def test_nice_ticks_widen_a_flat_range():
    ticks = nice_ticks(5, 5)
    assert ticks[0] < 5 < ticks[-1]


def test_nice_ticks_reject_infinite_ranges():
    with pytest.raises(ValueError):
        nice_ticks(0, math.inf)


@given(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6))
@example(0.0, 5e-324)
@example(0.0, 1e-12)
@example(1e6, 1e6 + 1e-6)
@example(5.6751278009185e-05, -200000.0)
def test_nice_ticks_always_cover_and_increase(a, b):
    ticks = nice_ticks(a, b)
    lo, hi = min(a, b), max(a, b)
    slack = 1e-6 * max(hi - lo, 1e-9 * max(abs(lo), abs(hi)), 1e-300)  # covered to a millionth of the span
    assert ticks[0] <= lo + slack and ticks[-1] >= hi - slack
    assert all(x < y for x, y in zip(ticks, ticks[1:]))
    assert 2 <= len(ticks) <= 12


def test_least_squares_recovers_a_line_and_refuses_degenerate_input():
    slope, intercept = least_squares([(0, 1), (1, 3), (2, 5)])
    assert slope == pytest.approx(2) and intercept == pytest.approx(1)
    assert least_squares([(1, 1)]) is None
    assert least_squares([(1, 1), (1, 2)]) is None


def test_trend_series_spans_the_points():
    trend = trend_series([(10, 9.0), (20, 8.0), (30, 7.5)], "trend", "#c00")
    assert trend.style == "dashed"
    assert [p[0] for p in trend.points] == [10, 30]
    assert trend.points[0][1] > trend.points[1][1]


def test_tick_labels_use_the_step_precision_and_suffixes():
    assert tick_label(2.5, 2.5) == "2.5"
    assert tick_label(0.002, 0.001) == "0.002"
    assert tick_label(200.0, 50) == "200"
    assert tick_label(20000, 5000) == "20k"
    assert tick_label(3_000_000, 1_000_000) == "3M"


def test_chart_is_valid_svg_with_axes_labels_points_and_legend():
    markup = line_chart(
        [
            Series("lm loss", [(1, 10.0), (2, 9.5), (3, 9.1)], "#999"),
            Series("sampled", [(1, 10.0), (3, 9.1)], "#00f", "dots"),
            Series("trend", [(1, 10.0), (3, 9.0)], "#f00", "dashed"),
        ],
        title="Loss",
        x_label="step",
        y_label="lm loss",
    )
    root = ET.fromstring(markup)
    assert root.tag == f"{NS}svg" and root.get("viewBox") == "0 0 600 280"
    texts = [t.text for t in root.iter(f"{NS}text")]
    assert "step" in texts and "lm loss" in texts and "sampled" in texts
    polylines = list(root.iter(f"{NS}polyline"))
    assert len(polylines) == 2
    assert len(polylines[0].get("points").split()) == 3
    assert polylines[1].get("stroke-dasharray")
    assert len(root.findall(f".//{NS}g/{NS}circle")) == 2


def test_points_are_scaled_into_the_plot_area():
    root = ET.fromstring(line_chart([Series("s", [(0, 0), (100, 50)], "#000")], title="t", x_label="x", y_label="y"))
    coords = [tuple(map(float, p.split(","))) for p in next(root.iter(f"{NS}polyline")).get("points").split()]
    (x0, y0), (x1, y1) = coords
    assert x0 == 64.0 and x1 == 582.0  # left margin .. width - right margin
    assert y0 > y1  # larger values are drawn higher up


def test_labels_are_escaped():
    markup = line_chart([Series("<b>&", [(0, 1), (1, 2)], "#000")], title="<t>", x_label="<x>", y_label="y")
    assert "<b>" not in markup and "&lt;b&gt;&amp;" in markup
    ET.fromstring(markup)


def test_non_finite_points_are_dropped_and_empty_charts_are_empty():
    assert line_chart([Series("s", [(0, math.nan), (1, math.inf)], "#000")], title="t", x_label="x", y_label="y") == ""
    assert line_chart([], title="t", x_label="x", y_label="y") == ""
    one = line_chart([Series("s", [(5, 1.0), (6, None)], "#000", "dots")], title="t", x_label="x", y_label="y")
    assert one.count("<circle") == 2  # the point plus its legend marker
