"""Helpers for end-to-end tests: run the real `invoke` CLI in a subprocess, read what it recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@dataclass
class InvokeResult:
    code: int
    out: str
    err: str
    reports: Path

    @property
    def run_dir(self) -> Path:
        return (self.reports / "latest").resolve()

    def results(self) -> dict:
        return json.loads((self.run_dir / "results.json").read_text())

    def record(self, stage: str, combo: str | None = None) -> dict:
        from cvs_tasks.run import combo_dir

        name = f"{stage}[{combo_dir(combo)}].json" if combo else f"{stage}.json"
        return json.loads((self.run_dir / "stages" / name).read_text())

    def test(self, name: str) -> dict:
        return next(t for t in self.results()["tests"] if t["name"] == name)


def run_invoke(*args: str, reports: Path, timeout: float = 600, env: dict | None = None) -> InvokeResult:
    full_env = dict(os.environ, CVS_REPORTS_DIR=str(reports), COLUMNS="160")
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        cwd=REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return InvokeResult(proc.returncode, proc.stdout, proc.stderr, reports)


@pytest.fixture
def reports(tmp_path) -> Path:
    path = tmp_path / "reports"
    path.mkdir()
    return path


def edited_config(src: Path, dest_dir: Path, edit) -> Path:
    """A copy of a packaged config (and its threshold file next to it) with ``edit(cfg)`` applied."""
    cfg = json.loads(src.read_text())
    thr_name = cfg.get("threshold_json")
    if thr_name:
        for cand in (src.parent / thr_name, REPO / "thresholds" / src.parent.name / thr_name,
                     REPO / "thresholds" / thr_name):
            if cand.is_file():
                (dest_dir / cand.name).write_text(cand.read_text())
                cfg["threshold_json"] = cand.name
                break
    edit(cfg)
    dest = dest_dir / src.name
    dest.write_text(json.dumps(cfg, indent=2))
    return dest


def impossible_gate(tmp_path: Path, metric: str, spec: dict):
    """A config edit (for ``edited_config``) that sets ``metric`` to ``spec`` in every cell of the
    copied threshold file: a gate no run can pass."""

    def edit(cfg):
        thr = tmp_path / cfg["threshold_json"]
        data = json.loads(thr.read_text())
        for cell in data.values():
            if isinstance(cell, dict):
                cell[metric] = spec
        thr.write_text(json.dumps(data))

    return edit


def pytest_collection_modifyitems(config, items):
    """Every end-to-end test is in the slow tier (`testbed`), also the host-runtime ones that need
    no testbed: `-m "not testbed"` stays the fast suite."""
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.testbed)
