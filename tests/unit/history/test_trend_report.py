"""The report draws a trend sparkline per gated metric from the history of this config and cluster."""

from __future__ import annotations

import re

from cvs_tasks.history import entry_from_run, record_run
from cvs_tasks.history.store import report_trends
from cvs_tasks.report import render_all
from cvs_tasks.report.svg import sparkline
from tests.unit.history.runs import make_run


def test_sparkline_marks_fail_runs_and_rings_the_newest():
    svg = str(sparkline([("a", 500.0, "PASS"), ("b", 300.0, "FAIL"), ("c", 505.0, "PASS")], "TFLOP/s/GPU"))
    assert svg.startswith("<svg") and svg.count("<circle") == 2 and "#c62828" in svg
    assert "newest c" in svg and "500, 300, 505" in svg
    assert str(sparkline([])) == ""


def test_the_report_shows_the_last_runs_of_each_gated_metric(tmp_path):
    root = tmp_path / "reports"
    db = root / "history.sqlite"
    values = [500.0, 510.0, 495.0, 420.0]
    for i, v in enumerate(values):
        run = make_run(root, f"r{i}", created=100.0 + i, tput=v, metric_status="FAIL" if v < 450 else "PASS")
        record_run(db, entry_from_run(run))
    make_run(root, "other", created=150.0, tput=1.0, hosts=["10.9.9.9"])  # another cluster: not in the trend
    record_run(db, entry_from_run(__import__("cvs_tasks.run", fromlist=["RunDir"]).RunDir(root / "other")))
    html = (render_all(run, report_trends())["report"]).read_text()
    assert "Trend (last runs)" in html
    titles = re.findall(r"<title>(last \d+ runs[^<]*)</title>", html)
    assert any("500, 510, 495, 420" in t and "newest r3" in t for t in titles), titles


def test_no_history_means_no_trend_column(tmp_path):
    run = make_run(tmp_path / "reports", "r0", created=1.0)
    html = render_all(run, report_trends())["report"].read_text()
    assert "Trend (last runs)" not in html
