"""rich tables for `invoke history` and `invoke compare` (the console view; JSON is the record).

Run ids, configs, kernel versions and other node facts are node text: every cell is ``cell`` text
(no markup, control characters shown; ``cvs_tasks.terminal``)."""

from __future__ import annotations

import time
from typing import Any

from rich.table import Table
from rich.text import Text

from cvs_tasks.history.compare import Comparison
from cvs_tasks.terminal import cell

VERDICT_STYLE = {"PASS": "green", "FAIL": "bold red", "RECORD": "dim", "SKIPPED": "dim",
                 "-": "dim"}


def _verdict(text: str | None) -> Text:
    text = text or "-"
    return cell(text, VERDICT_STYLE.get(text, ""))


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.4g}" if abs(v) < 1e4 else f"{v:,.0f}"


def when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "-"


def runs_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title=f"history: {len(rows)} run(s), newest first", title_justify="left")
    for col in ("run", "started", "verdict", "suite", "nodes", "config", "combos"):
        table.add_column(col, overflow="fold")
    for r in rows:
        combos = Text()
        for i, (combo, verdict) in enumerate(r["combos"].items()):
            combos.append_text(cell(("  " if i else "") + combo + " "))
            combos.append_text(_verdict(verdict))
        config = (r.get("config_file") or "").rsplit("/", 1)[-1] + f" [{r['config_hash'][:8]}]"
        table.add_row(cell(r["run_id"]), cell(when(r["started"])), _verdict(r["verdict"]),
                      cell(f"{r['suite']} {r['backend']}"), cell(len(r["hosts"])), cell(config), combos)
    return table


def comparison_tables(cmp: Comparison) -> list[Table]:
    a, b = cmp.a, cmp.b
    head = Table(title=cell(f"compare {a.run_id} -> {b.run_id}"), title_justify="left", show_header=False)
    head.add_column("")
    head.add_column("A")
    head.add_column("B")
    head.add_row("verdict", _verdict(a.verdict), _verdict(b.verdict))
    head.add_row("started", cell(when(a.started)), cell(when(b.started)))
    head.add_row("config", cell(a.config_hash), cell(b.config_hash))
    head.add_row("image digest", cell(a.image_digest or "-"), cell(b.image_digest or "-"))
    head.add_row("provenance", cell(a.provenance), cell(b.provenance, "" if cmp.same_provenance else "yellow"))
    metrics = Table(title="metrics (delta = B - A)", title_justify="left")
    for col, just in (("combo", "left"), ("metric", "left"), ("A", "right"), ("B", "right"),
                      ("delta", "right"), ("%", "right"), ("A verdict", "left"), ("B verdict", "left")):
        metrics.add_column(col, justify=just)
    for m in cmp.metrics:
        pct = "-" if m.pct is None else f"{m.pct:+.1f}%"
        style = "bold" if m.pct is not None and abs(m.pct) >= 5 else ""
        name = m.metric.removeprefix("training.")
        metrics.add_row(cell(m.combo), cell(f"{name} ({m.unit})" if m.unit else name), cell(_num(m.a)),
                        cell(_num(m.b)), cell("-" if m.delta is None else f"{m.delta:+.4g}"), cell(pct, style),
                        _verdict(m.status_a), _verdict(m.status_b))
    nodes = Table(title="node fingerprints that differ" if cmp.nodes else "node fingerprints: no difference",
                  title_justify="left")
    for col in ("node", "fact", "A", "B"):
        nodes.add_column(col)
    for n in cmp.nodes:
        nodes.add_row(cell(n.host), cell(n.fact), cell(n.a if n.a is not None else "-"),
                      cell(n.b if n.b is not None else "-"))
    return [head, metrics, nodes]
