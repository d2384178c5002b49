import os
from pathlib import Path

import pytest

import cvs_tasks.metrics.parser as parser_module
from cvs_tasks.metrics import native

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


@pytest.fixture(autouse=True, params=["native", "python"])
def parser_path(request, monkeypatch):
    """Every metrics test runs twice: with the C scanner and with the pure-Python path.

    Both must give the same answers; the native run fails (not skips) when the extension is not
    built, so a broken build cannot pass CI unnoticed (CVS_TASKS_PURE_PYTHON=1 opts out).
    """
    use_native = request.param == "native"
    if use_native and not native.AVAILABLE:
        if os.environ.get("CVS_TASKS_PURE_PYTHON", "") not in ("", "0"):
            pytest.skip("CVS_TASKS_PURE_PYTHON is set")
        pytest.fail("the native scanner cvs_tasks.metrics._itscan is not built: run pip install -e .",
                    pytrace=False)
    monkeypatch.setattr(parser_module, "NATIVE", use_native)
    return request.param


@pytest.fixture
def window_spy(monkeypatch):
    """``spy(name)`` wraps ``LogParser.<name>``; the list it returns gets one entry per window,
    True when that path read the window (returned something other than None)."""
    def spy(name: str) -> list[bool]:
        used: list[bool] = []
        original = getattr(parser_module.LogParser, name)

        def wrapper(self, block):
            found = original(self, block)
            used.append(found is not None)
            return found

        monkeypatch.setattr(parser_module.LogParser, name, wrapper)
        return used
    return spy


@pytest.fixture
def fixture_log():
    def read(name: str) -> Path:
        return FIXTURES / name
    return read
