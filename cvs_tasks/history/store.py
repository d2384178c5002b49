"""Writing runs into the history: one transaction per run, replace-on-rerecord, never fatal.

A run is recorded each time it finishes (also after a ``--run`` resume, which replaces the earlier
rows of that run). ``record_run_safely`` turns any database trouble into a warning: the run
directory is the source of truth and ``rebuild`` re-imports it later.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Callable

from cvs_tasks.history.db import HistoryUnavailable, open_db
from cvs_tasks.history.entry import RunEntry, entry_from_run
from cvs_tasks.run.rundir import MANIFEST, RunDir


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
            "INSERT INTO combos (run_id, combo, training, verdict, args_hash, provenance) VALUES (?, ?, ?, ?, ?, ?)",
            [(entry.run_id, c.combo, c.training, c.verdict, c.args_hash, c.provenance) for c in entry.combos])
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
