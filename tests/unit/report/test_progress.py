"""A running stage's nodes summarised (issue #25 item 6): plain NodeProgress values in, a summary out."""

from __future__ import annotations

from cvs_tasks.report.progress import SHOWN_TROUBLE, counts_text, steps_text, summarise, summary_line
from cvs_tasks.run.events import NodeProgress


def node(rank: int, step: int | None = 50, state: str = "running", tflops: float | None = 400.0) -> NodeProgress:
    return NodeProgress("training", "X", f"n{rank:04d}", rank, state, step=step, total=100, tflops=tflops)


def test_counts_per_state_and_min_median_max_step():
    s = summarise([node(0, 10), node(1, 20), node(2, 30, "done"), node(3, 40, "failed")])
    assert counts_text(s) == "4 nodes: 2 running, 1 done, 1 failed"
    assert steps_text(s) == "step 10 / 25 / 40 (min / median / max) of 100"


def test_a_uniform_fleet_has_no_slowest_nodes():
    s = summarise([node(r, 50, tflops=400.0 + r % 3) for r in range(1024)])
    assert s.slowest == [] and s.trouble == [] and "slowest" not in summary_line("t", s)


def test_nodes_behind_or_slow_are_named_furthest_behind_first():
    nodes = [node(r) for r in range(1024)]
    nodes[7] = node(7, 41)
    nodes[900] = node(900, 50, tflops=300.0)  # at the median step, but at 75 % of the median rate
    nodes[5] = node(5, 45)
    s = summarise(nodes)
    assert [p.rank for p in s.slowest] == [7, 5, 900]


def test_every_failed_or_stalled_node_comes_first_capped_with_a_count():
    nodes = [node(r) for r in range(1024)]
    for r in (1000, 3, 500, 17, 800, 2, 9):
        nodes[r] = node(r, state="failed" if r % 2 else "stalled")
    s = summarise(nodes)
    assert [p.rank for p in s.trouble] == [2, 3, 9, 17, 500][:SHOWN_TROUBLE]
    assert s.more_trouble == 2
    line = summary_line("test_training[X]", s)
    assert line.startswith("test_training[X]: 1024 nodes: 1017 running, 3 failed, 4 stalled; step 50 / 50 / 50")
    assert "failed or stalled: n0002 (stalled), n0003 (failed), n0009 (failed), n0017 (failed), n0500 (stalled)" \
           " (+2 more)" in line


def test_before_any_step_there_is_no_step_text():
    s = summarise([node(r, None, "starting", None) for r in range(20)])
    assert steps_text(s) == "" and counts_text(s) == "20 nodes: 20 starting" and s.slowest == []
