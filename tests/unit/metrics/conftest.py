from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


@pytest.fixture
def fixture_log():
    def read(name: str) -> Path:
        return FIXTURES / name
    return read
