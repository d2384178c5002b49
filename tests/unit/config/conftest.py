from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest
from config_helpers import minimal_config, minimal_thresholds, write_json


@pytest.fixture
def suite_files(tmp_path: Path) -> Callable[..., Path]:
    """Write a config (and by default a matching thr.json) in tmp_path; return the config path."""

    def write(config: dict[str, Any] | None = None, thresholds: dict[str, Any] | None = None,
              name: str = "suite_single.json") -> Path:
        write_json(tmp_path / "thr.json", minimal_thresholds() if thresholds is None else thresholds)
        return write_json(tmp_path / name, minimal_config() if config is None else config)

    return write
