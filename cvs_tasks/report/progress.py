"""A running stage's nodes in a few lines, for the live console at scale.

Up to ``SUMMARY_ABOVE`` nodes the console shows a row per node. Above that a row per node is a
screen of 1,024 lines per refresh, so a stage is summarised instead: how many nodes are in each
state, the step the nodes are at (min / median / max of the plan), every failed or stalled node
first, then the slowest ones, capped to a few rows. Pure: the nodes' last progress in, a summary out.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Iterable

from cvs_tasks.run.events import NodeProgress

SUMMARY_ABOVE = 16  # nodes in a stage before the console summarises it
STATES = ("starting", "running", "done", "failed", "stalled")
TROUBLE = frozenset({"failed", "stalled"})
SHOWN_TROUBLE = 5  # failed or stalled nodes named in a summary
SHOWN_SLOWEST = 3  # slowest running nodes named after them
SLOW_RATE = 0.9  # below this share of the median TFLOP/s a node counts as slow even at the median step


@dataclass(frozen=True)
class StageSummary:
    nodes: int
    states: dict[str, int]  # state -> node count, in STATES order, only states that occur
    step_min: int | None
    step_median: float | None
    step_max: int | None
    total: int | None  # the plan's steps
    trouble: list[NodeProgress]  # failed and stalled nodes, by rank (at most SHOWN_TROUBLE)
    more_trouble: int  # failed or stalled nodes not in ``trouble``
    slowest: list[NodeProgress]  # the furthest behind of the running nodes that are behind at all


def summarise(nodes: Iterable[NodeProgress]) -> StageSummary:
    everyone = list(nodes)
    states: dict[str, int] = {}
    for p in everyone:
        states[p.state] = states.get(p.state, 0) + 1
    ordered = {s: states[s] for s in STATES if s in states} | {s: n for s, n in states.items() if s not in STATES}
    trouble = sorted((p for p in everyone if p.state in TROUBLE), key=lambda p: (p.rank, p.host))
    steps = [p.step for p in everyone if p.step is not None]
    median = statistics.median(steps) if steps else None
    rates = [p.tflops for p in everyone if p.tflops is not None]
    slow_rate = SLOW_RATE * statistics.median(rates) if rates else None
    behind = sorted((p for p in everyone if p.state not in TROUBLE and p.state != "done"
                     and _behind(p, median, slow_rate)),
                    key=lambda p: (p.step if p.step is not None else -1,
                                   p.tflops if p.tflops is not None else float("inf"), p.rank))
    totals = [p.total for p in everyone if p.total]
    return StageSummary(
        nodes=len(everyone),
        states=ordered,
        step_min=min(steps) if steps else None,
        step_median=median,
        step_max=max(steps) if steps else None,
        total=max(totals) if totals else None,
        trouble=trouble[:SHOWN_TROUBLE],
        more_trouble=max(0, len(trouble) - SHOWN_TROUBLE),
        slowest=behind[:SHOWN_SLOWEST],
    )


def _behind(p: NodeProgress, median_step: float | None, slow_rate: float | None) -> bool:
    """An outlier: behind the median step, or slower than SLOW_RATE of the median TFLOP/s."""
    if p.step is None:
        return median_step is not None
    if median_step is not None and p.step < median_step:
        return True
    return slow_rate is not None and p.tflops is not None and p.tflops < slow_rate


def counts_text(summary: StageSummary) -> str:
    """``1024 nodes: 1000 running, 20 done, 3 failed, 1 stalled``"""
    return f"{summary.nodes} nodes: " + ", ".join(f"{n} {state}" for state, n in summary.states.items())


def steps_text(summary: StageSummary) -> str:
    """``step 10 / 12 / 14 (min / median / max) of 200``; "" before any step."""
    if summary.step_min is None:
        return ""
    median = summary.step_median
    shown = f"{median:g}" if median is not None else "-"
    of = f" of {summary.total}" if summary.total else ""
    return f"step {summary.step_min} / {shown} / {summary.step_max} (min / median / max){of}"


def node_text(p: NodeProgress) -> str:
    """``node-17 (rank 17) step 10`` with its TFLOP/s and note when known."""
    parts = [f"{p.host} (rank {p.rank})"]
    if p.step is not None:
        parts.append(f"step {p.step}")
    if p.tflops is not None:
        parts.append(f"{p.tflops:.1f} TFLOP/s")
    if p.note:
        parts.append(f"- {p.note}")
    return " ".join(parts)


def summary_line(name: str, summary: StageSummary) -> str:
    """The whole summary on one line (plain console output): counts, steps, trouble, slowest."""
    parts = [f"{name}: {counts_text(summary)}"]
    steps = steps_text(summary)
    if steps:
        parts.append(steps)
    if summary.trouble:
        more = f" (+{summary.more_trouble} more)" if summary.more_trouble else ""
        parts.append("failed or stalled: " + ", ".join(f"{p.host} ({p.state})" for p in summary.trouble) + more)
    if summary.slowest:
        parts.append("slowest: " + ", ".join(node_text(p) for p in summary.slowest))
    return "; ".join(parts)
