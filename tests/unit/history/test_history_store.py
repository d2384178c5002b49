"""The history records every finished run, survives a broken database, and takes concurrent writers."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3

from cvs_tasks.history import HistoryUnavailable, entry_from_run, open_db, rebuild, record_run, record_run_safely
from cvs_tasks.history.db import SCHEMA_VERSION
from tests.unit.history.runs import COMBO, HOSTS, make_run


def test_a_run_is_recorded_with_its_metrics_nodes_and_provenance(tmp_path):
    run = make_run(tmp_path / "reports", "r1", created=1000.0, tput=512.5, args="abc")
    db = tmp_path / "reports" / "history.sqlite"
    record_run(db, entry_from_run(run))
    conn = open_db(db)
    row = conn.execute("SELECT run_id, cluster, verdict, image_digest, config_hash, provenance FROM runs").fetchone()
    assert row[0] == "r1" and row[1] == ",".join(sorted(HOSTS)) and row[2] == "PASS"
    assert row[3] == "sha256:aaa" and len(row[4]) == 16 and len(row[5]) == 16
    value = conn.execute("SELECT value, status FROM metrics WHERE combo = ? AND name = ?",
                         (COMBO, "training.throughput_per_gpu")).fetchone()
    assert value == (512.5, "PASS")
    facts = [json.loads(f) for (f,) in conn.execute("SELECT facts FROM nodes ORDER BY rank")]
    assert [f["driver"] for f in facts] == ["6.10.5", "6.10.5"]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_provenance_changes_with_the_trainer_arguments_and_the_image(tmp_path):
    a = entry_from_run(make_run(tmp_path, "a", created=1.0, args="h1"))
    b = entry_from_run(make_run(tmp_path, "b", created=2.0, args="h2"))
    c = entry_from_run(make_run(tmp_path, "c", created=3.0, args="h1"))
    assert a.combos[0].provenance != b.combos[0].provenance
    assert a.combos[0].provenance == c.combos[0].provenance
    facts = {h: {"image_digest": "sha256:bbb"} for h in HOSTS}
    d = entry_from_run(make_run(tmp_path, "d", created=4.0, args="h1", facts=facts))
    assert d.combos[0].provenance != a.combos[0].provenance


def test_recording_a_resumed_run_again_replaces_its_rows(tmp_path):
    db = tmp_path / "h.sqlite"
    run = make_run(tmp_path / "reports", "r1", created=1.0, tput=400.0)
    record_run(db, entry_from_run(run))
    run = make_run(tmp_path / "reports", "r1", created=1.0, tput=450.0)
    record_run(db, entry_from_run(run))
    conn = open_db(db)
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1
    assert conn.execute("SELECT value FROM metrics WHERE name = 'training.throughput_per_gpu'").fetchone()[0] == 450.0


def test_a_corrupt_database_is_a_warning_not_a_lost_run(tmp_path):
    run = make_run(tmp_path / "reports", "r1", created=1.0)
    db = tmp_path / "h.sqlite"
    db.write_bytes(b"this is not a database" * 100)
    warnings = []
    assert record_run_safely(run, db, warnings.append) is False
    assert len(warnings) == 1 and "r1" in warnings[0] and "history.rebuild" in warnings[0]
    assert (run.path / "run.json").is_file()  # the run directory is untouched


def test_a_locked_database_is_a_warning_after_the_busy_timeout(tmp_path, monkeypatch):
    from cvs_tasks.history import db as dbmod

    monkeypatch.setattr(dbmod, "BUSY_TIMEOUT_MS", 200)
    path = tmp_path / "h.sqlite"
    open_db(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        warnings = []
        run = make_run(tmp_path / "reports", "r1", created=1.0)
        assert record_run_safely(run, path, warnings.append) is False
        assert "locked" in warnings[0]
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_newer_schema_is_refused_not_misread(tmp_path):
    path = tmp_path / "h.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    try:
        open_db(path)
    except HistoryUnavailable as exc:
        assert "newer" in str(exc)
    else:
        raise AssertionError("a newer schema must be refused")


def test_rebuild_reimports_run_directories_and_replaces_a_corrupt_file(tmp_path):
    reports = tmp_path / "reports"
    for i in range(3):
        make_run(reports, f"r{i}", created=float(i))
    db = reports / "history.sqlite"
    db.write_bytes(b"garbage" * 1000)
    count, problems = rebuild(reports, db)
    assert count == 3
    assert any("moved it to" in p for p in problems)
    assert open_db(db).execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 3


def _finish(root, db, run_id, barrier, results):
    run = make_run(root, run_id, created=float(len(run_id)))
    barrier.wait(timeout=60)
    warnings = []
    ok = record_run_safely(run, db, warnings.append)
    results.put((run_id, ok, warnings))


def test_two_harness_processes_finishing_at_once_both_land(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    db = tmp_path / "reports" / "history.sqlite"
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_finish, args=(tmp_path / "reports", db, rid, barrier, results))
             for rid in ("run-a", "run-bb")]
    for p in procs:
        p.start()
    got = sorted(results.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert got == [("run-a", True, []), ("run-bb", True, [])]
    ids = {r for (r,) in open_db(db).execute("SELECT run_id FROM runs")}
    assert ids == {"run-a", "run-bb"}
