"""Fixtures of the hostile-input suite (no testbed: everything runs on this machine, in a sandbox)."""

from __future__ import annotations

import pytest

from tests.hostile.hostile_helpers import Sandbox


@pytest.fixture
def sandbox(tmp_path) -> Sandbox:
    return Sandbox(tmp_path)
