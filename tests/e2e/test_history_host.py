"""The history end to end on this machine (host runtime, no Docker or SSH): every finished run and
every resume is recorded, a corrupt database costs a warning and not the run, rebuild restores it."""

from __future__ import annotations

import json
import sqlite3

from tests.e2e.conftest import REPO, run_invoke

DEMO = REPO / "configs" / "testbed" / "demo_host.json"
LOCAL = REPO / "cluster" / "localhost.json"
FLAGS = ["--config", str(DEMO), "--cluster", str(LOCAL)]


def runs_in(db) -> dict[str, tuple]:
    with sqlite3.connect(db) as conn:
        return {r: (v, f) for r, v, f in conn.execute("SELECT run_id, verdict, finished FROM runs")}


def test_runs_and_resumes_are_recorded_and_a_corrupt_history_is_only_a_warning(reports):
    db = reports / "history.sqlite"
    first = run_invoke("all", *FLAGS, reports=reports)
    assert first.code == 0, first.out + first.err
    run_id = first.run_dir.name
    assert runs_in(db)[run_id][0] == "PASS"
    finished = runs_in(db)[run_id][1]
    assert (first.run_dir / "passing_nodes.txt").read_text() == "localhost\n"

    resumed = run_invoke("all", *FLAGS, "--run", run_id, reports=reports)  # everything done: re-recorded
    assert resumed.code == 0, resumed.out + resumed.err
    assert list(runs_in(db)) == [run_id] and runs_in(db)[run_id][1] > finished

    for suffix in ("-wal", "-shm"):
        (reports / f"history.sqlite{suffix}").unlink(missing_ok=True)
    db.write_bytes(b"not a database at all" * 512)
    broken = run_invoke("all", *FLAGS, reports=reports)
    assert broken.code == 0, broken.out + broken.err
    assert "not recorded in the history" in broken.out + broken.err
    assert json.loads((broken.run_dir / "results.json").read_text())["verdict"] == "PASS"

    rebuilt = run_invoke("history.rebuild", reports=reports)
    assert rebuilt.code == 0, rebuilt.out + rebuilt.err
    assert "2 run(s) recorded" in rebuilt.out
    assert set(runs_in(db)) == {run_id, broken.run_dir.name}
    listed = run_invoke("history", "--json", reports=reports)
    assert [r["run_id"] for r in json.loads(listed.out)] == [broken.run_dir.name, run_id]
