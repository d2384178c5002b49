"""Reading the history: recent runs with filters, one run back as a RunEntry, a metric's series.

Every query is bounded (``LIMIT``) and rides an index, so a history of ten thousand runs answers
as fast as a young one.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from cvs_tasks.history.entry import ComboEntry, MetricEntry, NodeEntry, RunEntry

RUN_COLUMNS = ("run_id", "started", "finished", "cluster", "hosts", "config_hash", "config_file", "suite",
               "backend", "gpu_name", "model_name", "image", "image_digest", "verdict", "verdict_reason",
               "provenance", "run_dir")


@dataclass(frozen=True)
class RunFilter:
    """What `invoke history` narrows by; None means any."""

    config: str | None = None   # config hash (prefix) or a part of the config file path
    cluster: str | None = None  # a host, or the cluster key (sorted hosts joined by commas)
    combo: str | None = None
    verdict: str | None = None  # PASS / FAIL (of the run, or of the combo when combo is given)
    limit: int = 20


def recent_runs(conn: sqlite3.Connection, f: RunFilter = RunFilter()) -> list[dict[str, Any]]:
    """Newest first: one dict per run with its combos' verdicts (``combos``: combo -> verdict)."""
    where, params = [], []
    if f.config:
        where.append("(runs.config_hash LIKE ? OR runs.config_file LIKE ?)")
        params += [f.config + "%", f"%{f.config}%"]
    if f.cluster:
        where.append("(runs.cluster = ? OR (',' || runs.cluster || ',') LIKE ?)")
        params += [f.cluster, f"%,{f.cluster},%"]
    if f.combo:
        clause = "EXISTS (SELECT 1 FROM combos c WHERE c.run_id = runs.run_id AND c.combo = ?"
        params.append(f.combo)
        if f.verdict:
            clause += " AND c.verdict = ?"
            params.append(f.verdict.upper())
        where.append(clause + ")")
    elif f.verdict:
        where.append("runs.verdict = ?")
        params.append(f.verdict.upper())
    sql = (f"SELECT {', '.join('runs.' + c for c in RUN_COLUMNS)} FROM runs"
           + (" WHERE " + " AND ".join(where) if where else "")
           + " ORDER BY runs.started DESC LIMIT ?")
    rows = [dict(zip(RUN_COLUMNS, r)) for r in conn.execute(sql, (*params, max(1, int(f.limit))))]
    for row in rows:
        row["hosts"] = json.loads(row["hosts"])
        row["combos"] = {c: v for c, v in conn.execute(
            "SELECT combo, verdict FROM combos WHERE run_id = ? ORDER BY rowid", (row["run_id"],))}
    return rows


def find_run_id(conn: sqlite3.Connection, text: str) -> str | None:
    """A run id, or a unique prefix of one."""
    exact = conn.execute("SELECT run_id FROM runs WHERE run_id = ?", (text,)).fetchone()
    if exact:
        return exact[0]
    found = conn.execute("SELECT run_id FROM runs WHERE run_id LIKE ? LIMIT 2", (text + "%",)).fetchall()
    return found[0][0] if len(found) == 1 else None


def load_entry(conn: sqlite3.Connection, run_id: str) -> RunEntry | None:
    row = conn.execute(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        return None
    d = dict(zip(RUN_COLUMNS, row))
    d["hosts"] = json.loads(d["hosts"])
    metrics: dict[str, list[MetricEntry]] = {}
    for combo, name, value, unit, expected, status in conn.execute(
            "SELECT combo, name, value, unit, expected, status FROM metrics WHERE run_id = ? ORDER BY rowid",
            (run_id,)):
        metrics.setdefault(combo, []).append(MetricEntry(name, value, unit or "", expected or "-", status or ""))
    combos = [ComboEntry(c, t, v, a, p, metrics.get(c, [])) for c, t, v, a, p in conn.execute(
        "SELECT combo, training, verdict, args_hash, provenance FROM combos WHERE run_id = ? ORDER BY rowid",
        (run_id,))]
    nodes = [NodeEntry(h, r, s, json.loads(f)) for h, r, s, f in conn.execute(
        "SELECT host, rank, status, facts FROM nodes WHERE run_id = ? ORDER BY rank", (run_id,))]
    return RunEntry(**d, combos=combos, nodes=nodes)


def metric_series(conn: sqlite3.Connection, config_hash: str, cluster: str, combo: str, metric: str, *,
                  limit: int, verdict: str | None = None, before: float | None = None,
                  exclude_run: str | None = None) -> list[tuple[str, float, float, str]]:
    """(run_id, started, value, run verdict) of the last ``limit`` runs of this config on this cluster
    that have a value for ``metric`` in ``combo``; oldest first. ``verdict`` narrows to PASS runs."""
    sql = ("SELECT runs.run_id, runs.started, m.value, runs.verdict FROM runs "
           "JOIN metrics m ON m.run_id = runs.run_id AND m.combo = ? AND m.name = ? "
           "WHERE runs.config_hash = ? AND runs.cluster = ? AND m.value IS NOT NULL")
    params: list[Any] = [combo, metric, config_hash, cluster]
    if verdict:
        sql += " AND runs.verdict = ?"
        params.append(verdict)
    if before is not None:
        sql += " AND runs.started < ?"
        params.append(before)
    if exclude_run:
        sql += " AND runs.run_id != ?"
        params.append(exclude_run)
    sql += " ORDER BY runs.started DESC LIMIT ?"
    params.append(max(1, int(limit)))
    return list(reversed(conn.execute(sql, params).fetchall()))


def passing_runs(conn: sqlite3.Connection, *, config_file: str | None, cluster: str, limit: int,
                 gpu_name: str | None = None) -> list[dict[str, Any]]:
    """The last ``limit`` PASS runs of this config file (any config hash) on this cluster, oldest first,
    each with ``metrics``: combo -> metric -> value."""
    sql = ("SELECT run_id, started FROM runs WHERE verdict = 'PASS' AND cluster = ? "
           "AND EXISTS (SELECT 1 FROM metrics m WHERE m.run_id = runs.run_id)")  # not a diagnose-only run
    params: list[Any] = [cluster]
    if config_file:
        sql += " AND config_file = ?"
        params.append(config_file)
    if gpu_name:
        sql += " AND gpu_name = ?"
        params.append(gpu_name)
    sql += " ORDER BY started DESC LIMIT ?"
    params.append(max(1, int(limit)))
    out = []
    for run_id, started in reversed(conn.execute(sql, params).fetchall()):
        metrics: dict[str, dict[str, float]] = {}
        for combo, name, value in conn.execute(
                "SELECT combo, name, value FROM metrics WHERE run_id = ? AND value IS NOT NULL", (run_id,)):
            metrics.setdefault(combo, {})[name] = value
        out.append({"run_id": run_id, "started": started, "metrics": metrics})
    return out
