"""`invoke loss`: gate a trained combo on a downward lm-loss trend."""

from invoke import Collection

from cvs_tasks.tasks import train
from cvs_tasks.tasks._lifecycle import HELP, lifecycle_task, request, stage_task


@lifecycle_task("loss_curve", pre=[train.run], default=True, help=HELP, iterable=["combo"])
def check(c, config=None, cluster=None, run=None, suite=None, combo=None, force=False, dry_run=False, reports_dir=None):
    """Least-squares slope of the sampled loss curve vs loss_curve.max_slope (test_loss_curve)."""
    stage_task(c, "loss_curve", request(c, config, cluster, run, suite, dry_run, force, reports_dir), combos=combo)


ns = Collection("loss", check)
