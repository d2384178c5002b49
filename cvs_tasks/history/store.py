"""The runs in the history database: written one transaction per run, read back as lists, entries
and series.

Writing: a run is recorded each time it finishes (also after a ``--run`` resume, which replaces the
earlier rows of that run), and each time a command of an ad hoc run ends (``record_command``).
``record_run_safely`` turns any database trouble into a warning: the run directory is the source
of truth and ``rebuild`` re-imports it later.

Reading: recent runs with filters, one run back as a RunEntry, a metric's series (the baseline gate's
past values and the report's trend sparklines), the passing runs calibration uses. Every query is
bounded (``LIMIT``) and rides an index, so a history of ten thousand runs answers as fast as a
young one.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from cvs_tasks.history.db import HistoryUnavailable, history_path, open_db, present, reading
from cvs_tasks.history.entry import (
    ComboEntry,
    MetricEntry,
    NodeEntry,
    RunEntry,
    cluster_key,
    config_hash,
    entry_from_run,
)
from cvs_tasks.run.rundir import MANIFEST, RunDir
from cvs_tasks.run.stages import METRIC


# -- writing ---------------------------------------------------------------------------------------
def record_run(db_path: Path, entry: RunEntry) -> None:
    """Insert (or replace) one run and its combos, metrics and nodes, atomically."""
    conn = open_db(db_path)
    try:
        write_entry(conn, entry)
    except sqlite3.Error as exc:
        raise HistoryUnavailable(f"cannot record run {entry.run_id} in {db_path}: {exc}") from None
    finally:
        conn.close()


def write_entry(conn: sqlite3.Connection, entry: RunEntry) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("DELETE FROM runs WHERE run_id = ?", (entry.run_id,))
        conn.execute(
            "INSERT INTO runs (run_id, started, finished, cluster, hosts, config_hash, config_file, suite, "
            "backend, gpu_name, model_name, image, image_digest, verdict, verdict_reason, provenance, run_dir) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (entry.run_id, entry.started, entry.finished, entry.cluster, json.dumps(entry.hosts),
             entry.config_hash, entry.config_file, entry.suite, entry.backend, entry.gpu_name,
             entry.model_name, entry.image, entry.image_digest, entry.verdict, entry.verdict_reason,
             entry.provenance, entry.run_dir))
        conn.executemany(
            "INSERT INTO combos (run_id, combo, training, verdict, args_hash, provenance, reason) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(entry.run_id, c.combo, c.training, c.verdict, c.args_hash, c.provenance, c.reason)
             for c in entry.combos])
        conn.executemany(
            "INSERT OR REPLACE INTO metrics (run_id, combo, name, value, unit, expected, status) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(entry.run_id, c.combo, m.name, m.value, m.unit, m.expected, m.status)
             for c in entry.combos for m in c.metrics])
        conn.executemany(
            "INSERT INTO nodes (run_id, host, rank, status, facts) VALUES (?, ?, ?, ?, ?)",
            [(entry.run_id, n.host, n.rank, n.status, json.dumps(n.facts, sort_keys=True)) for n in entry.nodes])
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def record_run_safely(run: RunDir, db_path: Path, warn: Callable[[str], None]) -> bool:
    """Record ``run``; on any trouble call ``warn`` with what happened and what to do. Never raises."""
    try:
        record_run(db_path, entry_from_run(run))
        return True
    except HistoryUnavailable as exc:
        warn(f"warning: run {run.run_id} not recorded in the history: {exc}")
    except Exception as exc:  # a history bug must not cost the run: the run directory has it all
        warn(f"warning: run {run.run_id} not recorded in the history ({type(exc).__name__}: {exc}); "
             "`invoke history.rebuild` re-imports it")
    return False


def record_command(session: Any) -> bool:
    """After any lifecycle command (a stage run by hand, a chain, `invoke all`): this run's history
    row, inserted or replaced (one row per run id), so an ad hoc run is in the history when its
    last command ends. A dry run (nothing kept) or ``history.enabled`` false records nothing; any
    trouble is a warning on the session's console, never the command's failure."""
    if not getattr(session.run, "durable", False) or not session.config.history.enabled:
        return False
    return record_run_safely(session.run, session.history_path, lambda text: session.say(text, "warning"))


def run_dirs(reports_root: Path) -> list[RunDir]:
    """Every run directory under ``reports_root`` (not ``latest``), oldest name first."""
    root = Path(reports_root)
    if not root.is_dir():
        return []
    return [RunDir(p) for p in sorted(root.iterdir())
            if p.is_dir() and not p.is_symlink() and (p / MANIFEST).is_file()]


def rebuild(reports_root: Path, db_path: Path) -> tuple[int, list[str]]:
    """Re-import every run directory; (runs recorded, problems). A fresh file replaces a corrupt one."""
    db_path = Path(db_path)
    problems: list[str] = []
    try:
        conn = open_db(db_path)
    except HistoryUnavailable as exc:
        aside = db_path.with_name(db_path.name + ".corrupt")
        problems.append(f"{exc}; moved it to {aside}")
        for suffix in ("", "-wal", "-shm"):
            src = Path(str(db_path) + suffix)
            if src.exists():
                src.replace(Path(str(aside) + suffix))
        conn = open_db(db_path)
    count = 0
    try:
        for run in run_dirs(reports_root):
            try:  # a crashed run is imported too (its verdict is FAIL, incomplete)
                write_entry(conn, entry_from_run(run))
                count += 1
            except Exception as exc:
                problems.append(f"{run.path}: {type(exc).__name__}: {exc}")
    finally:
        conn.close()
    return count, problems


# -- reading ---------------------------------------------------------------------------------------
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
        combos = conn.execute("SELECT combo, verdict, reason FROM combos WHERE run_id = ? ORDER BY rowid",
                              (row["run_id"],)).fetchall()
        row["combos"] = {c: v for c, v, _ in combos}
        row["combo_reasons"] = {c: r or "" for c, _, r in combos}
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
    combos = [ComboEntry(c, t, v, a, p, metrics.get(c, []), r or "") for c, t, v, a, p, r in conn.execute(
        "SELECT combo, training, verdict, args_hash, provenance, reason FROM combos WHERE run_id = ? ORDER BY rowid",
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


# -- the report's trend lines ----------------------------------------------------------------------
TREND_RUNS = 20
GATED = frozenset({"PASS", "FAIL"})

Trends = dict[str, dict[str, list[tuple[str, float, str]]]]  # combo -> metric -> (run id, value, verdict)


def run_trends(db_path: Path, manifest: Mapping[str, Any], results: Mapping[str, Any], *,
               runs: int = TREND_RUNS) -> Trends:
    """Per combo and gated metric of ``results``: the last ``runs`` values of this config on this
    cluster up to this run, oldest first. {} when there is no history yet; HistoryUnavailable when
    one is there but cannot be read (the caller warns: a trend is decoration, never a failed report)."""
    if not present(Path(db_path)):
        return {}
    cfg, cluster = config_hash(manifest.get("effective_config")), cluster_key(manifest.get("hosts") or [])
    until = float(manifest.get("created") or 0.0) + 1e-3
    out: Trends = {}
    with reading(Path(db_path)) as conn:
        for test in results.get("tests", []):
            if test.get("stage") != METRIC.id or not test.get("combo"):
                continue
            for metric in test.get("metrics", []):
                if metric.get("status") not in GATED:
                    continue
                series = metric_series(conn, cfg, cluster, test["combo"], metric["name"], limit=runs, before=until)
                if series:
                    out.setdefault(test["combo"], {})[metric["name"]] = [(r, v, verdict) for r, _, v, verdict in series]
    return out


def report_trends(history: Path | None = None,
                  warn: Callable[[str], None] = lambda text: None) -> Callable[[RunDir, Mapping, Mapping], Trends]:
    """The trend source ``report.render_all`` takes: each gated metric's last runs from ``history``
    (the caller's config or flag; default ``$CVS_HISTORY_DB`` or ``<reports>/history.sqlite``), never
    a path the run directory names (a run directory is data, not a place to write to). {} without a
    history, and {} with a warning to ``warn`` when it cannot be read: a report never needs it."""
    def trends(run: RunDir, manifest: Mapping[str, Any], results: Mapping[str, Any]) -> Trends:
        try:
            return run_trends(history or history_path(run.path.parent), manifest, results)
        except HistoryUnavailable as exc:
            warn(f"warning: history unreadable: {exc}; the report has no trend lines")
        except Exception as exc:  # a trend is decoration: a history bug must not stop a report
            warn(f"warning: trend lines left out ({type(exc).__name__}: {exc})")
        return {}
    return trends
