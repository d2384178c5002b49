"""`invoke thresholds.calibrate`: a threshold file from the last passing runs in the history."""

from __future__ import annotations

from invoke import Collection, task

from cvs_tasks.errors import BadInput
from cvs_tasks.tasks._common import configured, number_flag, reports_root, user_errors
from cvs_tasks.tasks.history import COMMON

MAX_RUNS = 1000


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


ns = Collection("thresholds", calibrate)
