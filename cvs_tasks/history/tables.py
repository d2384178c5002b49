"""rich tables for `invoke history` and `invoke compare` (the console view; JSON is the record)."""

from __future__ import annotations

import time
from typing import Any

from rich.table import Table
from rich.text import Text

from cvs_tasks.history.compare import Comparison

VERDICT_STYLE = {"PASS": "green", "FAIL": "bold red", "RECORD": "dim", "SKIPPED": "dim",
                 "-": "dim"}


def _verdict(text: str | None) -> Text:
    text = text or "-"
    return Text(text, style=VERDICT_STYLE.get(text, ""))


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
            combos.append(("  " if i else "") + combo + " ")
            combos.append_text(_verdict(verdict))
        config = (r.get("config_file") or "").rsplit("/", 1)[-1] + f" [{r['config_hash'][:8]}]"
        table.add_row(r["run_id"], when(r["started"]), _verdict(r["verdict"]), f"{r['suite']} {r['backend']}",
                      str(len(r["hosts"])), config, combos)
    return table


def comparison_tables(cmp: Comparison) -> list[Table]:
    a, b = cmp.a, cmp.b
    head = Table(title=f"compare {a.run_id} -> {b.run_id}", title_justify="left", show_header=False)
    head.add_column("")
    head.add_column("A")
    head.add_column("B")
    head.add_row("verdict", _verdict(a.verdict), _verdict(b.verdict))
    head.add_row("started", when(a.started), when(b.started))
    head.add_row("config", a.config_hash, b.config_hash)
    head.add_row("image digest", a.image_digest or "-", b.image_digest or "-")
    head.add_row("provenance", a.provenance, Text(b.provenance, style="" if cmp.same_provenance else "yellow"))
    metrics = Table(title="metrics (delta = B - A)", title_justify="left")
    for col, just in (("combo", "left"), ("metric", "left"), ("A", "right"), ("B", "right"),
                      ("delta", "right"), ("%", "right"), ("A verdict", "left"), ("B verdict", "left")):
        metrics.add_column(col, justify=just)
    for m in cmp.metrics:
        pct = "-" if m.pct is None else f"{m.pct:+.1f}%"
        style = "bold" if m.pct is not None and abs(m.pct) >= 5 else ""
        name = m.metric.removeprefix("training.")
        metrics.add_row(m.combo, f"{name} ({m.unit})" if m.unit else name, _num(m.a), _num(m.b),
                        "-" if m.delta is None else f"{m.delta:+.4g}", Text(pct, style=style),
                        _verdict(m.status_a), _verdict(m.status_b))
    nodes = Table(title="node fingerprints that differ" if cmp.nodes else "node fingerprints: no difference",
                  title_justify="left")
    for col in ("node", "fact", "A", "B"):
        nodes.add_column(col)
    for n in cmp.nodes:
        nodes.add_row(n.host, n.fact, str(n.a if n.a is not None else "-"), str(n.b if n.b is not None else "-"))
    return [head, metrics, nodes]
