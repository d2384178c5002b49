from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

from cvs_tasks.report.render import render_all
from cvs_tasks.run.rundir import RunDir


def test_render_all_writes_the_four_files_atomically(fixture_run):
    run = fixture_run("passing_distributed")
    paths = render_all(run)
    assert set(paths) == {"results", "report", "metrics", "junit"}
    assert {p.name for p in paths.values()} == {"results.json", "report.html", "metrics.html", "junit.xml"}
    assert all(p.parent == run.path and p.stat().st_size > 0 for p in paths.values())
    assert not [name for name in os.listdir(run.path) if name.startswith(".")]  # no temp files left
    assert json.loads(paths["results"].read_text())["verdict"] == "PASS"
    ET.parse(paths["junit"])


def test_rerendering_is_deterministic(fixture_run):
    run = fixture_run("failed_nccl")
    first = {k: p.read_bytes() for k, p in render_all(run).items()}
    second = {k: p.read_bytes() for k, p in render_all(run).items()}
    assert first == second


def test_render_reads_only_the_run_directory(fixture_run):
    run = fixture_run("partial")
    moved = RunDir(run.path.rename(run.path.parent / "moved"))
    paths = render_all(moved)
    assert json.loads(paths["results"].read_text())["incomplete"] is True


def test_a_directory_without_manifest_or_records_renders(tmp_path):
    paths = render_all(RunDir(tmp_path / "empty"))
    assert "FAIL" in paths["report"].read_text()
