"""Issue #26 item 7: history and compare tell the truth. A combo that failed is FAIL with its reason;
every run is in the history when its last command ends, ad hoc runs included; `compare` shows each
gate's bound beside both values; an empty history is exit 0 with one line; 80 columns never cut a
run id."""

from __future__ import annotations

import json
import sqlite3
from io import StringIO
from types import SimpleNamespace

import pytest
from rich.console import Console

from cvs_tasks.errors import BadInput
from cvs_tasks.history import entry_from_run, open_db, record_run
from cvs_tasks.history.commands import (
    calibrate_thresholds,
    comparison_view,
    runs_view,
    show_compare,
    show_history,
)
from cvs_tasks.history.compare import compare
from cvs_tasks.history.db import MIGRATIONS, SCHEMA_VERSION
from cvs_tasks.history.store import RunFilter, load_entry, recent_runs, record_command
from cvs_tasks.run import MetricRow, StageRecord
from tests.unit.history.runs import COMBO, make_run

OOM = "gpu_oom on node 127.0.0.3 (log line 76): [rank7]: torch.OutOfMemoryError: HIP out of memory."
RUN_ID = "20261206-044803-ea9e"


def oom_run(root, run_id=RUN_ID, created=10.0):
    """A run whose combo died of OOM: training FAIL, its metric and loss rows SKIPPED."""
    run = make_run(root, run_id, created=created)
    run.write_record(StageRecord("training", "FAIL", combo=COMBO, reason=OOM))
    for stage in ("metric", "loss_curve"):
        rec = StageRecord(stage, "SKIPPED", combo=COMBO, reason=f"skipped: test_training[{COMBO}] failed")
        rec.data["blocked_by"] = f"test_training[{COMBO}]"
        run.write_record(rec)
    return run


def console(width: int) -> tuple[Console, StringIO]:
    out = StringIO()
    return Console(file=out, width=width, force_terminal=False), out


def test_a_combo_that_died_of_oom_is_fail_with_its_reason(tmp_path):
    db = tmp_path / "reports" / "history.sqlite"
    record_run(db, entry_from_run(oom_run(tmp_path / "reports")))
    (row,) = recent_runs(open_db(db))
    assert row["combos"] == {COMBO: "FAIL"}  # was SKIPPED: the metric row's status
    assert row["combo_reasons"] == {COMBO: f"test_training[{COMBO}]: {OOM}"}
    assert load_entry(open_db(db), RUN_ID).combos[0].reason == f"test_training[{COMBO}]: {OOM}"
    assert [r["run_id"] for r in recent_runs(open_db(db), RunFilter(combo=COMBO, verdict="FAIL"))] == [RUN_ID]


def test_a_passing_combo_has_no_reason_and_a_metric_failure_names_its_gate(tmp_path):
    db = tmp_path / "h.sqlite"
    record_run(db, entry_from_run(make_run(tmp_path, "ok", created=1.0)))
    bad = make_run(tmp_path, "slow", created=2.0, tput=300.0, metric_status="FAIL")
    rec = bad.read_record("metric", COMBO)
    rec.reason = "training.throughput_per_gpu: 300 is below the minimum 400"
    bad.write_record(rec)
    record_run(db, entry_from_run(bad))
    rows = {r["run_id"]: r for r in recent_runs(open_db(db))}
    assert rows["ok"]["combos"] == {COMBO: "PASS"} and rows["ok"]["combo_reasons"] == {COMBO: ""}
    assert rows["slow"]["combo_reasons"][COMBO] == (f"test_metric[{COMBO}]: training.throughput_per_gpu: 300 is "
                                                    "below the minimum 400")


def test_the_history_at_80_columns_is_lines_with_whole_run_ids_and_the_reason(tmp_path):
    db = tmp_path / "reports" / "history.sqlite"
    record_run(db, entry_from_run(oom_run(tmp_path / "reports")))
    out_console, out = console(80)
    show_history(tmp_path / "reports", None, RunFilter(), as_json=False, console=out_console)
    lines = out.getvalue().splitlines()
    assert lines[0] == "history: 1 run(s), newest first"
    assert lines[1].startswith(f"{RUN_ID}  ") and " FAIL - " in lines[1]
    assert lines[3] == f"  {COMBO} FAIL - test_training[{COMBO}]: {OOM}"
    assert all(not line.startswith(("┃", "│")) for line in lines)


def test_a_wide_console_gets_the_table_with_a_reason_column(tmp_path):
    db = tmp_path / "reports" / "history.sqlite"
    record_run(db, entry_from_run(oom_run(tmp_path / "reports")))
    (table,) = runs_view(recent_runs(open_db(db)), 400)
    wide, out = console(400)
    wide.print(table)
    assert "reason" in out.getvalue() and RUN_ID in out.getvalue() and "torch.OutOfMemoryError" in out.getvalue()


def test_an_empty_history_is_one_line_and_no_error(tmp_path):
    reports = tmp_path / "reports"
    out_console, out = console(80)
    assert show_history(reports, None, RunFilter(), as_json=False, console=out_console) == []
    assert out.getvalue().count("\n") == 1 and "no runs recorded yet" in out.getvalue()
    assert str(reports / "history.sqlite") in out.getvalue()
    assert not (reports / "history.sqlite").exists()  # reading created nothing
    record_run(reports / "history.sqlite", entry_from_run(make_run(reports, "r1", created=1.0)))
    out_console, out = console(80)
    assert show_history(reports, None, RunFilter(verdict="FAIL"), as_json=False, console=out_console) == []
    assert out.getvalue().count("\n") == 1 and "no run matches the filters" in out.getvalue()


def test_an_empty_history_as_json_is_an_empty_list(tmp_path, capsys):
    assert show_history(tmp_path, None, RunFilter(), as_json=True) == []
    assert json.loads(capsys.readouterr().out) == []


def test_calibrate_without_a_history_says_it_has_no_passing_runs(tmp_path):
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"username": "u", "priv_key_file": "/k", "node_dict": {"127.0.0.2": {}}}))
    with pytest.raises(BadInput, match=r"^only 0 passing run\(s\)"):
        calibrate_thresholds(tmp_path / "reports", None, config="/cfg/x.json", cluster=str(cluster),
                             output=str(tmp_path / "o.json"), runs=5, margin_pct=5.0, min_runs=3)


def flipped_runs(tmp_path):
    """A PASS -> FAIL flip at +0.0 %: the same value, the bound raised between the runs."""
    a = make_run(tmp_path, "run-a", created=1.0, tput=500.0)
    b = make_run(tmp_path, "run-b", created=2.0, tput=500.0, metric_status="FAIL")
    rec = b.read_record("metric", COMBO)
    rec.metrics[0] = MetricRow("training.throughput_per_gpu", 500.0, "TFLOP/s/GPU", ">= 520", "FAIL",
                               "500 is below the minimum 520")
    b.write_record(rec)
    return entry_from_run(a), entry_from_run(b)


def test_compare_shows_each_gates_bound_beside_both_values(tmp_path):
    cmp = compare(*flipped_runs(tmp_path))
    row = next(m for m in cmp.to_dict()["metrics"] if m["metric"] == "training.throughput_per_gpu")
    assert row["pct"] == 0.0 and (row["status_a"], row["status_b"]) == ("PASS", "FAIL")
    assert (row["expected_a"], row["expected_b"]) == (">= 400 TFLOP/s/GPU", ">= 520 TFLOP/s/GPU")
    assert row["bound_changed"] is True
    narrow, out = console(80)
    for renderable in comparison_view(cmp, 80):
        narrow.print(renderable, soft_wrap=True)
    text = out.getvalue()
    assert (f"  {COMBO} throughput_per_gpu (TFLOP/s/GPU): A 500 PASS (>= 400 TFLOP/s/GPU) -> B 500 FAIL "
            "(>= 520 TFLOP/s/GPU); +0 (+0.0%); bound changed") in text
    assert "compare run-a -> run-b" in text and text.endswith("node fingerprints: no difference\n")


def test_compare_on_a_wide_console_is_tables_with_the_bound_columns(tmp_path):
    cmp = compare(*flipped_runs(tmp_path))
    wide, out = console(400)
    for renderable in comparison_view(cmp, 400):
        wide.print(renderable)
    text = out.getvalue()
    assert "A bound" in text and "B bound" in text and ">= 520 TFLOP/s/GPU" in text


def test_show_compare_prints_at_the_consoles_width(tmp_path):
    reports = tmp_path / "reports"
    a, b = flipped_runs(reports)
    narrow, out = console(80)
    show_compare(reports, None, "run-a", "run-b", as_json=False, console=narrow, warn=lambda _: None)
    assert max(len(line) for line in out.getvalue().splitlines()) > 80  # lines, never folded cells
    assert "bound changed" in out.getvalue()


def test_a_version_1_history_is_upgraded_in_place_with_an_empty_reason(tmp_path):
    db = tmp_path / "h.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript(MIGRATIONS[0] + "; PRAGMA user_version = 1;")
    conn.execute("INSERT INTO runs (run_id, started, cluster, hosts, config_hash, verdict) "
                 "VALUES ('old', 1.0, 'a', '[\"a\"]', 'h', 'PASS')")
    conn.execute("INSERT INTO combos (run_id, combo, verdict) VALUES ('old', 'C', 'PASS')")
    conn.commit()
    conn.close()
    upgraded = open_db(db)
    assert upgraded.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    (row,) = recent_runs(upgraded)
    assert row["combos"] == {"C": "PASS"} and row["combo_reasons"] == {"C": ""}


# -- every run is in the history when its command ends --------------------------------------------
def fake_session(run, db, *, enabled=True):
    said = []
    config = SimpleNamespace(history=SimpleNamespace(enabled=enabled))
    session = SimpleNamespace(run=run, history_path=db, config=config,
                              say=lambda text, level="info": said.append((level, text)))
    return session, said


def test_a_stage_command_records_its_run_and_the_next_one_replaces_the_row(tmp_path):
    db = tmp_path / "reports" / "history.sqlite"
    run = make_run(tmp_path / "reports", RUN_ID, created=1.0)
    session, said = fake_session(run, db)
    assert record_command(session) is True
    oom_run(tmp_path / "reports")  # the next command of the same run: its combo failed
    assert record_command(session) is True
    rows = recent_runs(open_db(db))
    assert [r["run_id"] for r in rows] == [RUN_ID] and rows[0]["combos"] == {COMBO: "FAIL"}
    assert said == []


def test_nothing_is_recorded_for_a_dry_run_or_with_the_history_off(tmp_path):
    db = tmp_path / "h.sqlite"
    run = make_run(tmp_path, "r1", created=1.0)
    session, _ = fake_session(SimpleNamespace(durable=False, run_id="r1"), db)
    assert record_command(session) is False
    session, _ = fake_session(run, db, enabled=False)
    assert record_command(session) is False and not db.exists()


def test_a_broken_history_is_a_warning_for_the_command(tmp_path):
    db = tmp_path / "h.sqlite"
    db.write_bytes(b"not a database" * 100)
    session, said = fake_session(make_run(tmp_path, "r1", created=1.0), db)
    assert record_command(session) is False
    assert said and said[0][0] == "warning" and "r1" in said[0][1]
