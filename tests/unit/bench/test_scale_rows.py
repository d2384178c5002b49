"""The scale bench's rows from plain figures: what is reported and what is judged against what."""

from __future__ import annotations

from benchmarks.scale import cost_growth, rows_for


def _point(n: int, harness_cpu: float, threads: int = 7, frames: int = 0) -> dict:
    window = {"wall": 60.0, "harness_cpu": harness_cpu, "node_cpu": 5.0, "machine_cpu": harness_cpu + 5.0}
    setup = {"wall": 20.0, "harness_cpu": 0.006 * n, "node_cpu": 30.0, "machine_cpu": 31.0}
    return {"n": n, "window": window, "setup": setup, "threads": threads, "rss_growth": 135 * 1024 * n,
            "nodes_heard": n, "copied_bytes": 1 << 20, "progress_events": 10, "outcome": "interrupted",
            "frames": frames}


def _rows(plain_exec_cpu):
    single = {"setup": {"wall": 0.2}}
    points = [_point(64, 0.0134 * 64, 65), _point(1024, 0.0095 * 1024, 1025)]  # 13.4 / 9.5 ms per node-minute
    return {r["name"]: r for r in rows_for(single, points, 60.0, plain_exec_cpu)}


def test_the_cores_are_reported_and_the_cpu_per_node_minute_judged_in_plain_exec_round_trips():
    rows = _rows(0.0013)
    cores = rows["scale.harness_cores[N=1024]"]
    assert cores["target"] == "reported" and cores["status"] == "PASS" and "was a target of <= 0.25" in cores["detail"]
    judged = rows["scale.cpu_per_node_minute_vs_plain_exec[N=1024]"]
    assert judged["value"] == 7.308 and judged["target"] == "<= 15" and judged["status"] == "PASS"
    assert rows["scale.cpu_per_node_minute.max_vs_min"]["value"] == 1.411


def test_a_cheaper_round_trip_makes_the_same_cpu_a_miss_and_none_is_not_measured():
    assert _rows(0.0006)["scale.cpu_per_node_minute_vs_plain_exec[N=1024]"]["status"] == "MISS"  # 15.8 round trips
    unmeasured = _rows(None)["scale.cpu_per_node_minute_vs_plain_exec[N=1024]"]
    assert unmeasured["value"] is None and unmeasured["status"] == "MISS" and "not measured" in unmeasured["detail"]


def _by_name(points: list[dict]) -> dict[str, dict]:
    return {r["name"]: r for r in rows_for({"setup": {"wall": 0.1}}, points, 60.0, 0.0013)}


def test_growth_is_the_most_a_larger_n_costs_over_the_smallest():
    assert cost_growth([10.0, 12.0, 8.0]) == (1.2, 1.5)
    assert cost_growth([10.0, 16.0]) == (1.6, 1.6)
    assert cost_growth([10.0]) == (None, None)
    assert cost_growth([None, 3.0]) == (None, None)


def test_a_cost_that_falls_with_n_passes_and_one_that_grows_misses():
    rows = _by_name([_point(64, 1.0, frames=64 * 60), _point(1024, 8.0, frames=1024 * 20)])
    assert rows["scale.cpu_per_node_minute.growth"]["status"] == "PASS"
    assert rows["scale.cpu_per_node_minute.max_vs_min"]["value"] == round((1.0 / 64) / (8.0 / 1024), 3)
    assert "N=1024: 20 frames/node/min" in rows["scale.cpu_per_node_minute.max_vs_min"]["detail"]
    growing = _by_name([_point(64, 1.0, frames=3840), _point(1024, 32.0, frames=61440)])
    assert growing["scale.cpu_per_node_minute.growth"]["status"] == "MISS"
    assert growing["scale.cpu_per_node_minute.growth"]["value"] == 2.0


def test_threads_that_grow_with_n_miss():
    flat = _by_name([_point(64, 1.0, threads=7), _point(256, 4.0, threads=7)])
    assert flat["scale.threads_per_added_node"]["status"] == "PASS"
    grown = _by_name([_point(64, 1.0, threads=65), _point(256, 4.0, threads=257)])
    assert grown["scale.threads_per_added_node"]["status"] == "MISS"
