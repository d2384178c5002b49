"""The history benchmark builds a real history and times the real commands (small sizes here)."""

from __future__ import annotations

from benchmarks import history_bench


def test_history_bench_rows_measure_list_filter_and_trend():
    rows = history_bench.run(runs=50, nodes=4)
    assert [r["name"] for r in rows] == ["history.list", "history.list.vs_db_read", "history.list_filtered",
                                         "history.list_filtered.vs_db_read", "history.report_trend",
                                         "history.report_trend.vs_db_read"]
    assert all(r["value"] is not None for r in rows)  # a 50-run history is too small for its ratios to pass
    assert all(r["target"] == "reported" and r["status"] == "PASS" for r in rows[::2])
    assert "8 sparklines" in rows[4]["detail"]


def test_each_command_is_reported_and_its_cpu_judged_against_one_read_of_the_database():
    names = list(history_bench.VS_DB_READ)
    wall = dict.fromkeys(names, 0.02)
    cpu = {"history.list": 0.006, "history.list_filtered": 0.05, "history.report_trend": 0.06}
    rows = history_bench.history_rows(wall, cpu, db_read_cpu=0.03, details=dict.fromkeys(names, "d"))
    judged = {r["name"]: r for r in rows[1::2]}
    assert judged["history.list.vs_db_read"]["value"] == 0.2
    assert judged["history.list.vs_db_read"]["status"] == "PASS"
    assert judged["history.list_filtered.vs_db_read"]["status"] == "MISS"  # more than one pass over the history
    assert judged["history.report_trend.vs_db_read"]["value"] == 2.0
    assert judged["history.report_trend.vs_db_read"]["target"] == "<= 10"
    assert rows[0]["target"] == "reported" and "was a target of <= 1 s" in rows[0]["detail"]
