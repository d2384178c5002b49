"""Write results.json, report.html, metrics.html and junit.xml into a run directory.

Reads only the run directory (manifest, stage records, which log files exist), so any run — a
finished one, a crashed one, one still going — can be re-rendered at any time. Every file is
replaced atomically, so a browser or CI job never reads half a report. The trend sparklines come
from the caller (``trends``, e.g. ``cvs_tasks.history.store.report_trends``): the report layer
reads no history itself, so the history, which records what a report concluded, sits above it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from cvs_tasks.report.html import render_metrics, render_report
from cvs_tasks.report.junit import junit_xml
from cvs_tasks.report.nodes import write_node_lists
from cvs_tasks.report.results import build_results, read_manifest
from cvs_tasks.run.records import StepRow, step_rows
from cvs_tasks.run.rundir import RunDir
from cvs_tasks.run.stages import TRAINING

OUTPUTS = {"results": "results.json", "report": "report.html", "metrics": "metrics.html", "junit": "junit.xml"}

TrendSource = Callable[[RunDir, Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]
"""(run, manifest, results) -> combo -> metric -> the last runs' (run id, value, verdict)."""


def render_all(run: RunDir, trends: TrendSource | None = None) -> dict[str, Path]:
    """Render every report file of ``run``; returns {"results"|"report"|"metrics"|"junit": path}.

    ``trends`` gives the sparklines' past values (none without it); it must not raise, since a
    trend is decoration and never the reason a report is missing."""
    results = build_results(run)
    manifest = read_manifest(run)
    paths = {key: run.path / name for key, name in OUTPUTS.items()}
    run.write_json(paths["results"], results)
    html = render_report(
        results,
        effective_config=manifest.get("effective_config"),
        steps_by_combo=steps_by_combo(run, results.get("combos", [])),
        trends=trends(run, manifest, results) if trends is not None else {},
    )
    run.write_text(paths["report"], html)
    run.write_text(paths["metrics"], render_metrics(results))
    run.write_text(paths["junit"], junit_xml(results).decode("utf-8"))
    write_node_lists(run.path, results)
    return paths


def steps_by_combo(run: RunDir, combos: list[str]) -> dict[str, list[StepRow]]:
    """Per-step training rows of each combo (kept out of results.json; only the plots need them)."""
    out: dict[str, list[StepRow]] = {}
    for combo in combos:
        record = run.read_record(TRAINING.id, combo)
        if record is not None:
            out[combo] = step_rows(record.data)
    return out
