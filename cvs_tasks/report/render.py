"""Write results.json, report.html, metrics.html and junit.xml into a run directory.

Reads only the run directory (manifest, stage records, which log files exist), so any run — a
finished one, a crashed one, one still going — can be re-rendered at any time. Every file is
replaced atomically, so a browser or CI job never reads half a report.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Callable

from cvs_tasks.errors import InfraError
from cvs_tasks.report.html import render_metrics, render_report
from cvs_tasks.report.junit import junit_xml
from cvs_tasks.report.nodes import write_node_lists
from cvs_tasks.report.results import build_results, read_manifest
from cvs_tasks.run.records import StepRow, step_rows
from cvs_tasks.run.rundir import RunDir, write_json_atomic

OUTPUTS = {"results": "results.json", "report": "report.html", "metrics": "metrics.html", "junit": "junit.xml"}


def render_all(run: RunDir, warn: Callable[[str], None] = lambda text: None) -> dict[str, Path]:
    """Render every report file of ``run``; returns {"results"|"report"|"metrics"|"junit": path}.
    ``warn`` hears what was left out (the trend lines, when the history cannot be read)."""
    results = build_results(run)
    manifest = read_manifest(run)
    paths = {key: run.path / name for key, name in OUTPUTS.items()}
    write_json_atomic(paths["results"], results)
    html = render_report(
        results,
        effective_config=manifest.get("effective_config"),
        steps_by_combo=steps_by_combo(run, results.get("combos", [])),
        trends=trends_of(run, manifest, results, warn),
    )
    write_bytes_atomic(paths["report"], html.encode("utf-8"))
    write_bytes_atomic(paths["metrics"], render_metrics(results).encode("utf-8"))
    write_bytes_atomic(paths["junit"], junit_xml(results))
    write_node_lists(run.path, results)
    return paths


def trends_of(run: RunDir, manifest: dict[str, Any], results: dict[str, Any],
              warn: Callable[[str], None] = lambda text: None) -> dict[str, Any]:
    """Each gated metric's last runs from the history (config ``history.path``); {} without one, and
    {} with a warning when it cannot be read: the report never needs the history."""
    from cvs_tasks.history.db import HistoryUnavailable, history_path
    from cvs_tasks.history.trend import run_trends

    configured = ((manifest.get("effective_config") or {}).get("history") or {}).get("path") or None
    try:
        return run_trends(history_path(run.path.parent, configured), manifest, results)
    except HistoryUnavailable as exc:
        warn(f"warning: history unreadable: {exc}; the report has no trend lines")
    except Exception as exc:  # a trend is decoration: a history bug must not stop a report
        warn(f"warning: trend lines left out ({type(exc).__name__}: {exc})")
    return {}


def steps_by_combo(run: RunDir, combos: list[str]) -> dict[str, list[StepRow]]:
    """Per-step training rows of each combo (kept out of results.json; only the plots need them)."""
    out: dict[str, list[StepRow]] = {}
    for combo in combos:
        record = run.read_record("training", combo)
        if record is not None:
            out[combo] = step_rows(record.data)
    return out


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Temp file in the same directory, then rename over the target."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise InfraError(f"cannot write {path}: {exc.strerror or exc}") from None
