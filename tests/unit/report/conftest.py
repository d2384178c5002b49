"""Fixture run directories (tests/fixtures/rundir/*) copied to a temp dir, so rendering never
writes into the repository."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import pytest

from cvs_tasks.run.rundir import RunDir

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "rundir"


@pytest.fixture
def fixture_run(tmp_path: Path) -> Callable[[str], RunDir]:
    copies = iter(range(1000))

    def copy(name: str) -> RunDir:
        target = tmp_path / f"copy{next(copies)}" / name
        shutil.copytree(FIXTURES / name, target)
        return RunDir(target)

    return copy


def edit_record(run: RunDir, filename: str, change: Callable[[dict], None]) -> None:
    """Rewrite one stage record JSON of a copied fixture in place."""
    path = run.stages_dir / filename
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def edit_manifest(run: RunDir, change: Callable[[dict], None]) -> None:
    data = run.manifest()
    change(data)
    run.write_manifest(data)
