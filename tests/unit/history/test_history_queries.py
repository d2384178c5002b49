"""`invoke history` filters and `invoke compare` rows, on synthetic run directories."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cvs_tasks.history import entry_from_run, open_db, record_run
from cvs_tasks.history.compare import compare
from cvs_tasks.history.store import RunFilter, find_run_id, load_entry, metric_series, recent_runs
from tests.unit.history.runs import COMBO, make_run

OTHER_HOSTS = ["10.0.0.1", "10.0.0.2"]


@pytest.fixture
def history(tmp_path):
    root = tmp_path / "reports"
    db = root / "history.sqlite"
    specs = [("r1", 500.0, "PASS", None, None), ("r2", 510.0, "PASS", None, None),
             ("r3", 420.0, "FAIL", None, None), ("r4", 505.0, "PASS", OTHER_HOSTS, None),
             ("r5", 300.0, "PASS", None, {"gpu_name": "MI325X"})]
    for i, (rid, tput, status, hosts, config) in enumerate(specs):
        record_run(db, entry_from_run(make_run(root, rid, created=100.0 + i, tput=tput, metric_status=status,
                                               hosts=hosts, config=config)))
    return root, db


def ids(rows):
    return [r["run_id"] for r in rows]


def test_recent_runs_newest_first_and_limited(history):
    _, db = history
    conn = open_db(db)
    assert ids(recent_runs(conn)) == ["r5", "r4", "r3", "r2", "r1"]
    assert ids(recent_runs(conn, RunFilter(limit=2))) == ["r5", "r4"]


def test_filters_by_verdict_cluster_combo_and_config(history):
    _, db = history
    conn = open_db(db)
    assert ids(recent_runs(conn, RunFilter(verdict="fail"))) == ["r3"]
    assert ids(recent_runs(conn, RunFilter(cluster="10.0.0.1"))) == ["r4"]
    assert ids(recent_runs(conn, RunFilter(combo=COMBO, verdict="PASS"))) == ["r5", "r4", "r2", "r1"]
    assert recent_runs(conn, RunFilter(combo="MBS=9,GBS=9,PRECISION=FP8")) == []
    r5 = load_entry(conn, "r5")
    assert ids(recent_runs(conn, RunFilter(config=r5.config_hash[:6]))) == ["r5"]


def test_a_run_reads_back_as_it_was_recorded(history):
    root, db = history
    conn = open_db(db)
    entry = load_entry(conn, "r2")
    from cvs_tasks.run import RunDir

    assert entry == entry_from_run(RunDir(root / "r2"))
    assert entry.combos[0].metrics[0].value == 510.0 and entry.nodes[1].facts["driver"] == "6.10.5"
    assert find_run_id(conn, "r") is None and find_run_id(conn, "r3") == "r3"


def test_metric_series_is_this_config_on_this_cluster_only(history):
    _, db = history
    conn = open_db(db)
    r1 = load_entry(conn, "r1")
    series = metric_series(conn, r1.config_hash, r1.cluster, COMBO, "training.throughput_per_gpu", limit=10)
    assert [s[0] for s in series] == ["r1", "r2", "r3"]
    passing = metric_series(conn, r1.config_hash, r1.cluster, COMBO, "training.throughput_per_gpu", limit=10,
                            verdict="PASS")
    assert [s[2] for s in passing] == [500.0, 510.0]


def test_compare_gives_delta_percent_verdicts_and_node_differences(tmp_path):
    a = entry_from_run(make_run(tmp_path, "a", created=1.0, tput=500.0))
    facts = {"127.0.0.2": {"driver": "6.10.5"}, "127.0.0.3": {"driver": "6.9.0"}}
    b = entry_from_run(make_run(tmp_path, "b", created=2.0, tput=400.0, metric_status="FAIL", facts=facts))
    cmp = compare(a, b)
    tput = next(m for m in cmp.metrics if m.metric == "training.throughput_per_gpu")
    assert (tput.a, tput.b, tput.delta, tput.pct) == (500.0, 400.0, -100.0, -20.0)
    assert (tput.status_a, tput.status_b) == ("PASS", "FAIL")
    diffs = {(n.host, n.fact): (n.a, n.b) for n in cmp.nodes}
    assert diffs[("127.0.0.3", "driver")] == ("6.10.5", "6.9.0")
    assert ("127.0.0.2", "driver") not in diffs
    assert ("127.0.0.2", "gpu_count") in diffs  # b's fingerprint lacks it: a difference, not hidden


def test_the_tasks_print_json_tables_and_refuse_unknown_runs(history):
    root, _ = history
    run = [sys.executable, "-m", "invoke"]
    out = subprocess.run(run + ["history", "--reports-dir", str(root), "--verdict", "FAIL", "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert [r["run_id"] for r in json.loads(out.stdout)] == ["r3"]
    out = subprocess.run(run + ["compare", "r1", "r3", "--reports-dir", str(root)],
                         capture_output=True, text=True, timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert "-16.0%" in out.stdout and "-80" in out.stdout
    out = subprocess.run(run + ["history", "--reports-dir", str(root), "--verdict", "passed"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--verdict 'passed'" in out.stderr
    out = subprocess.run(run + ["compare", "r1", "nope", "--reports-dir", str(root)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "nope" in out.stderr
