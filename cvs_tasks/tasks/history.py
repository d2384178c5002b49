"""`invoke history` (recent runs), `invoke history.rebuild` (re-import run directories)."""

from __future__ import annotations

from invoke import Collection, task

from cvs_tasks.tasks._common import REPORTS_DIR_HELP, number_flag, reports_root, user_errors
from cvs_tasks.terminal import echo

COMMON = {
    "reports_dir": REPORTS_DIR_HELP,
    "history": "History database (default: <reports>/history.sqlite, or $CVS_HISTORY_DB)",
}

MAX_LIMIT = 100_000


@task(default=True, auto_shortflags=False, help={
    **COMMON,
    "config": "Only runs of this config (a config file path or name part, or a config hash prefix)",
    "cluster": "Only runs on this cluster (a host address, or the sorted hosts joined by commas)",
    "combo": "Only runs with this sweep cell (with --verdict: that cell's metric verdict)",
    "verdict": "PASS or FAIL",
    "limit": f"How many runs (default 20, at most {MAX_LIMIT})",
    "json": "Print JSON instead of a table",
})
def show(c, config=None, cluster=None, combo=None, verdict=None, limit=None, json=False, reports_dir=None,
         history=None):
    """Recent runs, newest first: verdict, suite, nodes, config, and each combo's verdict."""
    from cvs_tasks.history.commands import show_history
    from cvs_tasks.history.store import RunFilter

    with user_errors():
        show_history(reports_root(c, reports_dir), history,
                     RunFilter(config=config, cluster=cluster, combo=combo, verdict=verdict,
                               limit=number_flag("limit", limit, 20, 1, MAX_LIMIT, whole=True)),
                     as_json=bool(json))


@task(help=COMMON, auto_shortflags=False)
def rebuild(c, reports_dir=None, history=None):
    """Re-import every run directory into the history (after a corrupt or lost database)."""
    from cvs_tasks.history.commands import rebuild_history

    with user_errors():
        count, problems, path = rebuild_history(reports_root(c, reports_dir), history)
        for p in problems:
            echo(f"warning: {p}")
        echo(f"{count} run(s) recorded in {path}")


ns = Collection("history", show, rebuild)
