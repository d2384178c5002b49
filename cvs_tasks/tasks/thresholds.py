"""`invoke thresholds.calibrate`: a threshold file from the last passing runs in the history."""

from __future__ import annotations

from invoke import Collection, task

from cvs_tasks.errors import BadInput
from cvs_tasks.tasks._common import configured, reports_root, user_errors
from cvs_tasks.tasks.history import COMMON


@task(auto_shortflags=False, help={
    **COMMON,
    "config": "Suite config whose passing runs to use",
    "cluster": "Cluster file those runs ran on",
    "output": "Threshold file to write",
    "runs": "Use the last N passing runs (default 5)",
    "min_runs": "Refuse with fewer passing runs than this (default 3)",
    "margin_pct": "Least margin from the median, in % (default 5; wider when the runs scatter more)",
})
def calibrate(c, config=None, cluster=None, output=None, runs=5, min_runs=3, margin_pct=5.0, reports_dir=None,
              history=None):
    """Derive a threshold file per cell from the last N passing runs (robust margin; runs used recorded)."""
    from cvs_tasks.history.commands import calibrate_thresholds

    with user_errors():
        config, cluster = configured(c, "config", config), configured(c, "cluster", cluster)
        if not config or not cluster or not output:
            raise BadInput("thresholds.calibrate needs --config, --cluster and --output")
        path, data = calibrate_thresholds(reports_root(c, reports_dir), history, config=config, cluster=cluster,
                                          output=output, runs=int(runs), margin_pct=float(margin_pct),
                                          min_runs=int(min_runs))
        cal = data["_calibration"]
        cells = [k for k in data if not k.startswith("_")]
        print(f"{path}: {len(cells)} cell(s) from {len(cal['runs'])} passing run(s): {', '.join(cal['runs'])}")
        for cell in cells:
            for metric, spec in data[cell].items():
                used = cal["per_cell"][cell][metric]
                print(f"  {cell} {metric}: {spec['kind']} {spec['value']} (median {used['median']}, margin {used['margin']})")
        print(f"statistic: {cal['statistic']}")


ns = Collection("thresholds", calibrate)
