"""Write results.json, report.html, metrics.html and junit.xml into a run directory.

Reads only the run directory (manifest, stage records, which log files exist), so any run — a
finished one, a crashed one, one still going — can be re-rendered at any time. Every file is
replaced atomically, so a browser or CI job never reads half a report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from cvs_tasks.report.html import render_metrics, render_report
from cvs_tasks.report.junit import junit_xml
from cvs_tasks.report.nodes import write_node_lists
from cvs_tasks.report.results import build_results, read_manifest
from cvs_tasks.run.records import StepRow, step_rows
from cvs_tasks.run.rundir import RunDir
from cvs_tasks.run.stages import TRAINING

OUTPUTS = {"results": "results.json", "report": "report.html", "metrics": "metrics.html", "junit": "junit.xml"}


def render_all(run: RunDir, history: Path | None = None,
               warn: Callable[[str], None] = lambda text: None) -> dict[str, Path]:
    """Render every report file of ``run``; returns {"results"|"report"|"metrics"|"junit": path}.

    ``history``: the database the trend sparklines read (the caller's config or flag; default
    ``$CVS_HISTORY_DB`` or ``<reports>/history.sqlite``), never a path the run directory names.
    ``warn`` hears what was left out (the trend lines, when the history cannot be read)."""
    results = build_results(run)
    manifest = read_manifest(run)
    paths = {key: run.path / name for key, name in OUTPUTS.items()}
    run.write_json(paths["results"], results)
    html = render_report(
        results,
        effective_config=manifest.get("effective_config"),
        steps_by_combo=steps_by_combo(run, results.get("combos", [])),
        trends=trends_of(run, manifest, results, history, warn),
    )
    run.write_text(paths["report"], html)
    run.write_text(paths["metrics"], render_metrics(results))
    run.write_text(paths["junit"], junit_xml(results).decode("utf-8"))
    write_node_lists(run.path, results)
    return paths


def trends_of(run: RunDir, manifest: dict[str, Any], results: dict[str, Any],
              history: Path | None = None, warn: Callable[[str], None] = lambda text: None) -> dict[str, Any]:
    """Each gated metric's last runs from the history, {} without one, and {} with a warning when it
    cannot be read: the report never needs the history. The manifest's copy of the config's
    ``history.path`` is not followed: a run directory is data, not a place to write to."""
    from cvs_tasks.history.db import HistoryUnavailable, history_path
    from cvs_tasks.history.trend import run_trends

    try:
        return run_trends(history or history_path(run.path.parent), manifest, results)
    except HistoryUnavailable as exc:
        warn(f"warning: history unreadable: {exc}; the report has no trend lines")
    except Exception as exc:  # a trend is decoration: a history bug must not stop a report
        warn(f"warning: trend lines left out ({type(exc).__name__}: {exc})")
    return {}


def steps_by_combo(run: RunDir, combos: list[str]) -> dict[str, list[StepRow]]:
    """Per-step training rows of each combo (kept out of results.json; only the plots need them)."""
    out: dict[str, list[StepRow]] = {}
    for combo in combos:
        record = run.read_record(TRAINING.id, combo)
        if record is not None:
            out[combo] = step_rows(record.data)
    return out
