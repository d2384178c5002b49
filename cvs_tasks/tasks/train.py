"""`invoke train`: one full training run per sweep combo, watched to the end."""

from invoke import Collection

from cvs_tasks.tasks import smoke
from cvs_tasks.tasks._lifecycle import HELP, lifecycle_task, request, stage_task


@lifecycle_task("training", pre=[smoke.run], default=True, help=HELP, iterable=["combo"])
def run(c, config=None, cluster=None, run=None, suite=None, combo=None, force=False, dry_run=False, reports_dir=None):
    """Train the selected combos (all of sweep.runs by default) and record their results."""
    stage_task(c, "training", request(c, config, cluster, run, suite, dry_run, force, reports_dir), combos=combo)


ns = Collection("train", run)
