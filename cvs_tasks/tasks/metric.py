"""`invoke metric`: gate a trained combo's metrics against its threshold cell."""

from invoke import Collection

from cvs_tasks.tasks import train
from cvs_tasks.tasks._lifecycle import HELP, lifecycle_task, request, stage_task


@lifecycle_task("metric", pre=[train.run], default=True, help=HELP, iterable=["combo"])
def check(c, config=None, cluster=None, run=None, suite=None, combo=None, force=False, dry_run=False, reports_dir=None):
    """PASS/FAIL per metric from the recorded training result (test_metric)."""
    stage_task(c, "metric", request(c, config, cluster, run, suite, dry_run, force, reports_dir), combos=combo)


ns = Collection("metric", check)
