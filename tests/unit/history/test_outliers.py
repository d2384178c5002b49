"""The bad node: a failure, or step time / throughput beyond a robust bound from the median."""

from __future__ import annotations

from cvs_tasks.history.outliers import NodeSmoke, find_outliers


def node(host, step, tokens=None, status="PASS", reason=""):
    return NodeSmoke(host, status, step, tokens if tokens is not None else 1e7 / step, reason)


def test_one_slow_node_among_many_is_named_and_the_median_ignores_it():
    d = find_outliers([node(f"n{i}", 1600 + i) for i in range(7)] + [node("n7", 2400)], 10)
    assert [o["host"] for o in d.outliers] == ["n7"]
    assert "over the median" in d.outliers[0]["reason"] and 1600 <= d.median_step_ms <= 1607


def test_two_nodes_one_fifty_percent_slower_names_it():
    d = find_outliers([node("a", 1600), node("b", 2400)], 10)
    assert [o["host"] for o in d.outliers] == ["b"]


def test_a_failed_node_is_named_with_its_reason():
    d = find_outliers([node("a", 1600), node("b", None, 0, "FAIL", "exit 139: Segmentation fault")], 10)
    assert d.outliers == [{"host": "b", "reason": "smoke failed on its own: exit 139: Segmentation fault"}]
    assert "1 of 2 node(s) named" in d.summary


def test_nodes_within_tolerance_are_all_good():
    d = find_outliers([node("a", 1600), node("b", 1650), node("c", 1580)], 10)
    assert d.outliers == [] and "no outlier among 3" in d.summary


def test_diagnose_refuses_containers_it_may_not_relaunch():
    from types import SimpleNamespace

    from cvs_tasks.lifecycle.diagnose import _diagnose

    container = SimpleNamespace(runtime=SimpleNamespace(name="docker"), lifetime="persistent")
    session = SimpleNamespace(plan=SimpleNamespace(hosts=()), config=SimpleNamespace(container=container))
    record = _diagnose(session)
    assert record.status == "SKIPPED" and "per_run" in record.reason
