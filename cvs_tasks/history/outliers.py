"""Which node is the bad one: per-node smoke results -> outliers. Pure.

Each node ran the same smoke cell alone. A node is an outlier when its job failed, or when its
step time is above (or its tokens/s below) the median of the nodes that finished by more than
``tolerance_pct``. The median is the reference because one slow node cannot move it (with two
nodes it is their mean, so a node must be about twice the tolerance slower to be named).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Sequence


@dataclass(frozen=True)
class NodeSmoke:
    host: str
    status: str  # PASS / FAIL / ERROR of the node's own smoke job
    step_ms: float | None
    tokens: float | None
    reason: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Diagnosis:
    per_node: list[NodeSmoke]
    outliers: list[dict]  # {"host", "reason"}
    median_step_ms: float | None
    median_tokens: float | None
    summary: str

    def to_data(self) -> dict:
        return {"per_node": [n.to_dict() for n in self.per_node], "outliers": self.outliers,
                "median_step_ms": self.median_step_ms, "median_tokens": self.median_tokens,
                "summary": self.summary}


def find_outliers(nodes: Sequence[NodeSmoke], tolerance_pct: float) -> Diagnosis:
    done = [n for n in nodes if n.status == "PASS"]
    steps = [n.step_ms for n in done if n.step_ms is not None]
    tokens = [n.tokens for n in done if n.tokens is not None]
    med_step = statistics.median(steps) if steps else None
    med_tok = statistics.median(tokens) if tokens else None
    outliers = []
    for n in nodes:
        if n.status != "PASS":
            outliers.append({"host": n.host,
                             "reason": f"smoke {n.status.lower()}ed on its own: {n.reason}".rstrip(": ")})
            continue
        why = []
        if med_step and n.step_ms is not None and n.step_ms > med_step * (1 + tolerance_pct / 100):
            why.append(f"step time {n.step_ms:.0f} ms is {100 * (n.step_ms / med_step - 1):+.0f}% over the median "
                       f"{med_step:.0f} ms")
        if med_tok and n.tokens is not None and n.tokens < med_tok * (1 - tolerance_pct / 100):
            why.append(f"{n.tokens:.0f} tok/s/GPU is {100 * (n.tokens / med_tok - 1):+.0f}% under the median "
                       f"{med_tok:.0f}")
        if why:
            outliers.append({"host": n.host, "reason": "; ".join(why)})
    if outliers:
        summary = (f"{len(outliers)} of {len(nodes)} node(s) named: "
                   + "; ".join(f"{o['host']} ({o['reason']})" for o in outliers))
    else:
        summary = f"no outlier among {len(nodes)} node(s) (tolerance {tolerance_pct:g}% from the median)"
    return Diagnosis(list(nodes), outliers, med_step, med_tok, summary)
