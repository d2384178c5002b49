from __future__ import annotations

import json

import pytest
from invoke import Collection, Program

from cvs_tasks.tasks import report


def invoke(*args: str) -> int:
    program = Program(namespace=Collection(report.ns), version="test")
    try:
        program.run(["invoke", *args], exit=True)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_render_passing_run_exits_zero_and_writes_reports(fixture_run, capsys):
    run = fixture_run("passing_distributed")
    code = invoke("report", "--reports-dir", str(run.path.parent), "--run", run.path.name)
    out = capsys.readouterr().out
    assert code == 0
    assert (run.path / "report.html").is_file()
    assert json.loads((run.path / "results.json").read_text())["verdict"] == "PASS"
    assert "Verdict: PASS" in out and str(run.path / "junit.xml") in out


def test_render_failed_run_by_path_exits_one(fixture_run, capsys):
    run = fixture_run("failed_nccl")
    assert invoke("report.render", "--run", str(run.path)) == 1
    assert "verdict FAIL: 2 failed" in capsys.readouterr().err


def test_latest_run_from_reports_dir_env(fixture_run, monkeypatch):
    run = fixture_run("partial")
    (run.path.parent / "latest").symlink_to(run.path.name)
    monkeypatch.setenv("CVS_REPORTS_DIR", str(run.path.parent))
    assert invoke("report") == 1  # interrupted run: FAIL
    assert (run.path / "junit.xml").is_file()


def test_unknown_run_is_bad_input(tmp_path, capsys):
    assert invoke("report", "--reports-dir", str(tmp_path), "--run", "nope") == 2
    assert "no run directory found" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--run", "--reports-dir"])
def test_help_documents_the_flags(flag, capsys):
    invoke("--help", "report")
    assert flag in capsys.readouterr().out
