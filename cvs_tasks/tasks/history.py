"""The history's commands: `invoke history` (recent runs), `invoke history.rebuild` (re-import run
directories), `invoke compare RUN_A RUN_B` (two runs side by side) and `invoke thresholds.calibrate`
(a threshold file from the last passing runs). Each is flags and one call into ``history.commands``.
"""

from __future__ import annotations

from invoke import Collection

from cvs_tasks.errors import BadInput
from cvs_tasks.tasks._common import REPORTS_DIR_HELP, configured, number_flag, reports_root, task, user_errors
from cvs_tasks.terminal import echo

COMMON = {
    "reports_dir": REPORTS_DIR_HELP,
    "history": "History database (default: <reports>/history.sqlite, or $CVS_HISTORY_DB)",
}

MAX_LIMIT = 100_000
MAX_RUNS = 1000


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


@task(positional=["run_a", "run_b"], auto_shortflags=False,
      help={**COMMON, "run_a": "The earlier run (id, unique id prefix, or run directory)",
            "run_b": "The later run", "json": "Print JSON instead of tables"})
def compare(c, run_a=None, run_b=None, json=False, reports_dir=None, history=None):
    """Per combo and metric: both values, delta and %, both verdicts; per node: fingerprint differences."""
    from cvs_tasks.history.commands import show_compare

    with user_errors():
        if not run_a or not run_b:
            raise BadInput("compare needs two runs: invoke compare RUN_A RUN_B (see `invoke history`)")
        show_compare(reports_root(c, reports_dir), history, run_a, run_b, as_json=bool(json))


@task(auto_shortflags=False, help={
    **COMMON,
    "config": "Suite config whose passing runs to use",
    "cluster": "Cluster file those runs ran on",
    "output": "Threshold file to write (an existing file is kept unless --force)",
    "force": "Overwrite an existing --output file",
    "runs": f"Use the last N passing runs (default 5, at most {MAX_RUNS})",
    "min_runs": "Refuse with fewer passing runs than this (default 3)",
    "margin_pct": "Least margin from the median, in % (default 5, 0 to 100; wider when the runs scatter more)",
})
def calibrate(c, config=None, cluster=None, output=None, runs=None, min_runs=None, margin_pct=None, force=False,
              reports_dir=None, history=None):
    """Derive a threshold file per cell from the last N passing runs (robust margin; runs used recorded)."""
    from cvs_tasks.history.commands import calibrate_thresholds

    with user_errors():
        config, cluster = configured(c, "config", config), configured(c, "cluster", cluster)
        if not config or not cluster or not output:
            raise BadInput("thresholds.calibrate needs --config, --cluster and --output")
        path, data = calibrate_thresholds(reports_root(c, reports_dir), history, config=config, cluster=cluster,
                                          output=output, force=bool(force),
                                          runs=number_flag("runs", runs, 5, 1, MAX_RUNS, whole=True),
                                          margin_pct=number_flag("margin-pct", margin_pct, 5.0, 0, 100, unit=" %"),
                                          min_runs=number_flag("min-runs", min_runs, 3, 1, MAX_RUNS, whole=True))
        cal = data["_calibration"]
        cells = [k for k in data if not k.startswith("_")]
        print(f"{path}: {len(cells)} cell(s) from {len(cal['runs'])} passing run(s): {', '.join(cal['runs'])}")
        for cell in cells:
            for metric, spec in data[cell].items():
                used = cal["per_cell"][cell][metric]
                print(f"  {cell} {metric}: {spec['kind']} {spec['value']} "
                      f"(median {used['median']}, margin {used['margin']})")
        print(f"statistic: {cal['statistic']}")


ns = Collection("history", show, rebuild)
thresholds_ns = Collection("thresholds", calibrate)
