"""The scale bench's rows from plain data: growth of the per-node cost, frames, threads."""

from __future__ import annotations

from benchmarks.scale import cost_growth, rows_for


def point(n: int, harness_cpu: float, frames: int, threads: int = 7) -> dict:
    window = {"wall": 60.0, "harness_cpu": harness_cpu, "node_cpu": 10.0, "machine_cpu": 30.0}
    setup = {"wall": 5.0, "harness_cpu": 1.0, "node_cpu": 4.0, "machine_cpu": 6.0}
    return {"n": n, "outcome": "interrupted", "reason": "", "threads_before": 2, "threads": threads,
            "rss_growth": n * 100 * 1024, "progress_events": n * 30, "copied_bytes": n * 1000,
            "nodes_heard": n, "window": window, "setup": setup, "frames": frames, "frame_bytes": frames * 100}


def by_name(rows: list[dict]) -> dict[str, dict]:
    return {r["name"]: r for r in rows}


def test_growth_is_the_most_a_larger_n_costs_over_the_smallest():
    assert cost_growth([10.0, 12.0, 8.0]) == (1.2, 1.5)
    assert cost_growth([10.0, 16.0]) == (1.6, 1.6)
    assert cost_growth([10.0]) == (None, None)
    assert cost_growth([None, 3.0]) == (None, None)


def test_a_cost_that_falls_with_n_passes_and_one_that_grows_misses():
    falling = rows_for({"setup": {"wall": 0.1}}, [point(64, 1.0, 64 * 60), point(1024, 8.0, 1024 * 20)], 60)
    rows = by_name(falling)
    assert rows["scale.cpu_per_node_minute.growth"]["status"] == "PASS"
    assert rows["scale.cpu_per_node_minute.max_vs_min"]["value"] == round((1.0 / 64) / (8.0 / 1024), 3)
    assert "N=1024: 20 frames/node/min" in rows["scale.cpu_per_node_minute.max_vs_min"]["detail"]
    growing = by_name(rows_for({"setup": {"wall": 0.1}}, [point(64, 1.0, 3840), point(1024, 32.0, 61440)], 60))
    assert growing["scale.cpu_per_node_minute.growth"]["status"] == "MISS"
    assert growing["scale.cpu_per_node_minute.growth"]["value"] == 2.0


def test_threads_that_grow_with_n_miss():
    flat = by_name(rows_for({}, [point(64, 1.0, 100, threads=7), point(256, 4.0, 400, threads=7)], 60))
    assert flat["scale.threads_per_added_node"]["status"] == "PASS"
    grown = by_name(rows_for({}, [point(64, 1.0, 100, threads=65), point(256, 4.0, 400, threads=257)], 60))
    assert grown["scale.threads_per_added_node"]["status"] == "MISS"
