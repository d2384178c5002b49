"""The history benchmark builds a real history and times the real commands (small sizes here)."""

from __future__ import annotations

from benchmarks import history_bench


def test_history_bench_rows_measure_list_filter_and_trend():
    rows = history_bench.run(runs=50, nodes=4)
    assert [r["name"] for r in rows] == ["history.list", "history.list_filtered", "history.report_trend"]
    assert all(r["value"] is not None and r["status"] == "PASS" for r in rows)
    assert "8 sparklines" in rows[2]["detail"]
