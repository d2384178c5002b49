"""Fixtures of the reliability suite; the helpers live in ``helpers.py`` (one module, shared state)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.reliability.helpers import FIGURES, measured


def pytest_terminal_summary(terminalreporter):
    if not measured:
        return
    terminalreporter.write_sep("-", "reliability: time to detection")
    for fault, row in sorted(measured.items()):
        terminalreporter.write_line(f"{fault:<28} {row['detection_s']:>6.2f} s  "
                                    f"(bound {row['bound_s']} s, from {row['from']})")
    try:
        old = json.loads(FIGURES.read_text()) if FIGURES.is_file() else {}
        old.update(measured)
        FIGURES.write_text(json.dumps(old, indent=2, sort_keys=True))
    except OSError:
        pass


@pytest.fixture
def reports(tmp_path) -> Path:
    path = tmp_path / "reports"
    path.mkdir()
    return path


@pytest.fixture
def node_roots():
    """Scenario node folders under the shared dir, removed after the test (also on failure)."""
    made: list[Path] = []
    yield made
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


