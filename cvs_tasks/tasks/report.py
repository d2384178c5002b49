"""`invoke report`: re-render a run directory's reports (works on finished, failed or partial runs)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from invoke import Collection

from cvs_tasks.errors import GateFailed
from cvs_tasks.tasks._common import REPORTS_DIR_HELP, reports_root, task, user_errors
from cvs_tasks.terminal import echo


@task(
    default=True,
    help={
        "run": "Run id or run directory path (default: the latest run)",
        "reports_dir": REPORTS_DIR_HELP,
        "history": "History database for the trend sparklines (default: <reports>/history.sqlite, or $CVS_HISTORY_DB)",
    },
)
def render(c, run=None, reports_dir=None, history=None):
    """Write results.json, report.html, metrics.html and junit.xml; exit 1 if the verdict is FAIL."""
    from cvs_tasks.history.store import report_trends
    from cvs_tasks.report import print_summary, render_all
    from cvs_tasks.run.rundir import RunDir
    from cvs_tasks.run.state import first_mention, run_line, run_state

    with user_errors():
        run_dir = RunDir.resolve(reports_root(c, reports_dir), run)
        if first_mention(run_dir):
            manifest = run_dir.manifest()
            echo(run_line(run_dir.run_id, f"renders its reports ({run_state(run_dir).detail})",
                          manifest.get("config_file"), manifest.get("cluster_file")))
        trends = report_trends(Path(history).expanduser() if history else None,
                               warn=lambda text: echo(text, file=sys.stderr))
        paths = render_all(run_dir, trends)
        results = json.loads(paths["results"].read_text(encoding="utf-8"))
        for label, path in paths.items():
            echo(f"{label:>8}: {path}")
        print_summary(results, run_dir=run_dir.path)
        if results["verdict"] != "PASS":
            raise GateFailed(f"verdict FAIL: {results['verdict_reason']}")


ns = Collection("report", render)
