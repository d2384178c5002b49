"""The history is never needed to finish a run: a damaged or unreadable database is a warning for
every command that reads it, and exit 3 (not a traceback) for those that only read it."""

from __future__ import annotations

import json

import pytest

from cvs_tasks.errors import InfraError
from cvs_tasks.history import entry_from_run, record_run, record_run_safely
from cvs_tasks.history.commands import calibrate_thresholds, resolve_entries, show_history
from cvs_tasks.history.store import RunFilter, report_trends
from cvs_tasks.report import render_all
from tests.unit.history.damage import DAMAGE, damage, healthy_bytes, root_ignores_permissions
from tests.unit.history.runs import make_run


@pytest.fixture(params=DAMAGE)
def damaged(request, tmp_path):
    """(reports root, two run dirs, the damaged database path, the history flag value)."""
    if request.param == "permission" and root_ignores_permissions():
        pytest.skip("root reads a mode-000 file")
    reports = tmp_path / "reports"
    runs = [make_run(reports, f"2026010{i}-000000-abc{i}", created=float(i)) for i in range(2)]
    for run in runs:
        record_run(reports / "history.sqlite", entry_from_run(run))
    db = damage(reports / "history.sqlite", request.param, healthy_bytes(tmp_path))
    return reports, runs, db, str(db)


def test_history_says_the_database_is_unreadable_and_what_to_do(damaged):
    reports, _, db, flag = damaged
    with pytest.raises(InfraError) as caught:
        show_history(reports, flag, RunFilter(), as_json=True)
    assert str(caught.value).startswith("history unreadable: ") and str(db) in str(caught.value)
    assert "history.rebuild" in str(caught.value) or "cannot open" in str(caught.value)


def test_calibrate_says_the_database_is_unreadable(damaged, tmp_path):
    reports, _, _, flag = damaged
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"username": "u", "priv_key_file": "/k", "node_dict": {"127.0.0.2": {}}}))
    with pytest.raises(InfraError, match="^history unreadable: "):
        calibrate_thresholds(reports, flag, config="/cfg/x.json", cluster=str(cluster), output=str(tmp_path / "o.json"),
                             runs=5, margin_pct=5.0, min_runs=3)
    assert not (tmp_path / "o.json").exists()


def test_compare_warns_and_reads_the_run_directories(damaged):
    reports, runs, db, flag = damaged
    warnings: list[str] = []
    a, b = resolve_entries(reports, flag, [runs[0].run_id, runs[1].run_id], warnings.append)
    assert (a.run_id, b.run_id) == (runs[0].run_id, runs[1].run_id)
    assert len(warnings) == 1 and warnings[0].startswith("warning: history unreadable: ") and str(db) in warnings[0]


def test_the_report_warns_and_renders_without_trend_lines(damaged, monkeypatch):
    _, runs, db, flag = damaged
    monkeypatch.setenv("CVS_HISTORY_DB", flag)
    warnings: list[str] = []
    html = render_all(runs[1], report_trends(warn=warnings.append))["report"].read_text()
    assert "Trend (last runs)" not in html and runs[1].run_id in html
    assert len(warnings) == 1 and "history unreadable" in warnings[0] and str(db) in warnings[0]


def test_recording_a_run_warns(damaged):
    _, runs, _, flag = damaged
    warnings: list[str] = []
    assert record_run_safely(runs[1], __import__("pathlib").Path(flag), warnings.append) is False
    assert len(warnings) == 1 and warnings[0].startswith("warning: run ")


def test_a_missing_history_is_no_warning(tmp_path):
    reports = tmp_path / "reports"
    runs = [make_run(reports, f"r{i}", created=float(i)) for i in range(2)]
    warnings: list[str] = []
    assert [e.run_id for e in resolve_entries(reports, None, ["r0", "r1"], warnings.append)] == ["r0", "r1"]
    render_all(runs[0], report_trends(warn=warnings.append))
    assert warnings == []


def test_rebuild_moves_a_damaged_database_aside_and_reimports_the_runs(damaged):
    reports, runs, db, flag = damaged
    if not db.exists() or db.name != "history.sqlite" or not db.parent == reports:
        pytest.skip("nothing to move aside: the path itself cannot be reached")
    from cvs_tasks.history.store import rebuild

    count, problems = rebuild(reports, db)
    assert count == 2 and len(problems) == 1 and "moved it to" in problems[0]
    rows = show_history(reports, flag, RunFilter(), as_json=True)
    assert sorted(r["run_id"] for r in rows) == sorted(r.run_id for r in runs)
