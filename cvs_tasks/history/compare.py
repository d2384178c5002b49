"""Two runs side by side: per combo and metric both values, each with the bound it was judged
against (so a verdict that flips at +0.0 % shows its moved bound), the delta and %, both verdicts;
per node the fingerprint facts that differ. Pure: RunEntry in, rows out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cvs_tasks.history.entry import RunEntry
from cvs_tasks.report.formatting import bound_text


@dataclass(frozen=True)
class MetricDelta:
    combo: str
    metric: str
    unit: str
    a: float | None
    b: float | None
    status_a: str
    status_b: str
    expected_a: str = "-"  # the bound each run was judged against, as its report printed it
    expected_b: str = "-"

    @property
    def bound_changed(self) -> bool:
        """Both runs judged it, against different bounds: a verdict can flip at +0.0 %."""
        return "-" not in (self.expected_a, self.expected_b) and self.expected_a != self.expected_b

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def pct(self) -> float | None:
        if self.delta is None or not self.a:
            return None
        return 100.0 * self.delta / abs(self.a)


@dataclass(frozen=True)
class NodeDifference:
    host: str
    fact: str
    a: Any
    b: Any


@dataclass(frozen=True)
class Comparison:
    a: RunEntry
    b: RunEntry
    metrics: list[MetricDelta]
    nodes: list[NodeDifference]

    @property
    def same_provenance(self) -> bool:
        return self.a.provenance == self.b.provenance

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_a": self.a.run_id, "run_b": self.b.run_id,
            "verdict_a": self.a.verdict, "verdict_b": self.b.verdict,
            "same_config": self.a.config_hash == self.b.config_hash,
            "same_provenance": self.same_provenance,
            "metrics": [{"combo": m.combo, "metric": m.metric, "unit": m.unit, "a": m.a, "b": m.b,
                         "delta": m.delta, "pct": m.pct, "status_a": m.status_a, "status_b": m.status_b,
                         "expected_a": m.expected_a, "expected_b": m.expected_b, "bound_changed": m.bound_changed}
                        for m in self.metrics],
            "nodes": [{"host": n.host, "fact": n.fact, "a": n.a, "b": n.b} for n in self.nodes],
        }


def compare(a: RunEntry, b: RunEntry) -> Comparison:
    return Comparison(a, b, metric_deltas(a, b), node_differences(a, b))


def metric_deltas(a: RunEntry, b: RunEntry) -> list[MetricDelta]:
    """Every (combo, metric) either run has, in A's order then B's extras; absent on one side is None/'-'."""
    def table(run: RunEntry) -> dict[tuple[str, str], Any]:
        return {(c.combo, m.name): m for c in run.combos for m in c.metrics}

    ta, tb = table(a), table(b)
    keys = list(ta) + [k for k in tb if k not in ta]
    out = []
    for key in keys:
        ma, mb = ta.get(key), tb.get(key)
        unit = (ma or mb).unit
        out.append(MetricDelta(key[0], key[1], unit, ma.value if ma else None, mb.value if mb else None,
                               ma.status if ma else "-", mb.status if mb else "-",
                               bound_text(ma.expected, unit) if ma else "-",
                               bound_text(mb.expected, unit) if mb else "-"))
    return out


def node_differences(a: RunEntry, b: RunEntry) -> list[NodeDifference]:
    """Per host, each fingerprint fact whose value changed; a host in only one run is one row."""
    fa = {n.host: n.facts for n in a.nodes}
    fb = {n.host: n.facts for n in b.nodes}
    out: list[NodeDifference] = []
    for host in list(fa) + [h for h in fb if h not in fa]:
        if host not in fb or host not in fa:
            out.append(NodeDifference(host, "node", "present" if host in fa else "absent",
                                      "present" if host in fb else "absent"))
            continue
        for fact in sorted(set(fa[host]) | set(fb[host])):
            va, vb = fa[host].get(fact), fb[host].get(fact)
            if va != vb:
                out.append(NodeDifference(host, fact, va, vb))
    return out
