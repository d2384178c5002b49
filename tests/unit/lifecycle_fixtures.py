"""What the seam tests (``test_backend_added.py``, ``test_scheduler_added.py``) share: a
throw-away implementation registered for one test, the demo config cut to one combo with
everything under the test's folder, a session whose messages are kept, and the check that a
whole run passed with its report."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator, TypeVar

from cvs_tasks.lifecycle.session import RunRequest, Session, open_session
from cvs_tasks.run.events import Message

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "configs" / "testbed" / "demo_host.json"
THRESHOLDS = ROOT / "thresholds" / "testbed" / "demo_host_threshold.json"
LOCAL = ROOT / "cluster" / "localhost.json"
T = TypeVar("T")


@contextmanager
def registered(registry: ModuleType, item: T) -> Iterator[T]:
    """``item`` in ``registry`` (``cvs_tasks.backends``, ``cvs_tasks.schedulers``) for the block,
    out of it after, so a throw-away implementation never leaks into another test."""
    item = registry.register(item)
    try:
        yield item
    finally:
        registry.unregister(item.name)


def one_combo_demo(tmp_path: Path, name: str, image: str | None = None) -> tuple[Path, str]:
    """The demo config (on ``image`` if given) with its first combo only, its node logs, scripts
    and caches under ``tmp_path``, written to ``tmp_path / name``; returns its path and the combo."""
    cfg = json.loads(DEMO.read_text())
    if image is not None:
        cfg["container"]["image"] = image
    cfg["threshold_json"] = str(THRESHOLDS)
    cfg["paths"].update(log_dir=str(tmp_path / "nodes" / "{run-id}" / "logs"), scripts_dir=str(tmp_path / "scripts"),
                        data_cache_dir=str(tmp_path / "cache"))
    combo = cfg["sweep"]["runs"][0]
    cfg["sweep"]["runs"] = [combo]
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return path, combo


def open_listened(config: Path, cluster: Path, tmp_path: Path, **request: Any) -> tuple[Session, list[str]]:
    """A new run's session for ``config`` on ``cluster``, reports under ``tmp_path``; the list
    fills with the text of every message the run says."""
    said: list[str] = []

    def listen(event: object) -> None:
        if isinstance(event, Message):
            said.append(event.text)

    session = open_session(RunRequest(config=str(config), cluster=str(cluster), reports_dir=str(tmp_path / "reports"),
                                      new=True, **request), listener=listen)
    return session, said


def assert_passed_with_report(session: Session, code: int) -> dict:
    """The run ended 0 with a PASS verdict and wrote its reports; returns its results.json."""
    results = json.loads((session.run.path / "results.json").read_text())
    assert code == 0, results.get("verdict_reason")
    assert results["verdict"] == "PASS"
    for name in ("report.html", "metrics.html", "junit.xml"):
        assert (session.run.path / name).is_file(), name
    return results
