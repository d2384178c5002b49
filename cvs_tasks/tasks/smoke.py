"""`invoke smoke`: a short run of the smoke cell proving the model loads and trains."""

from invoke import Collection

from cvs_tasks.tasks import tokenizer
from cvs_tasks.tasks._lifecycle import NO_COMBO, lifecycle_task, request, stage_task


@lifecycle_task("smoke", pre=[tokenizer.download], default=True, help=NO_COMBO)
def run(c, config=None, cluster=None, run=None, suite=None, force=False, dry_run=False, reports_dir=None):
    """Run the smoke cell (test_smoke); skipped when smoke.enabled is false."""
    stage_task(c, "smoke", request(c, config, cluster, run, suite, dry_run, force, reports_dir))


ns = Collection("smoke", run)
