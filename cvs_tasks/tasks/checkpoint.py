"""`invoke checkpoint`: Primus checkpoint save + resume with loss continuity."""

from invoke import Collection

from cvs_tasks.tasks import container
from cvs_tasks.tasks._lifecycle import NO_COMBO, lifecycle_task, request, stage_task


@lifecycle_task("checkpoint", pre=[container.launch], default=True, help=NO_COMBO)
def run(c, config=None, cluster=None, run=None, suite=None, force=False, dry_run=False, reports_dir=None):
    """Save, resume and compare the loss at the first resumed step (test_checkpoint; Primus only)."""
    stage_task(c, "checkpoint", request(c, config, cluster, run, suite, dry_run, force, reports_dir))


ns = Collection("checkpoint", run)
