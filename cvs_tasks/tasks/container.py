"""`invoke container.*`: bring the training container up on every node, inspect it."""

from invoke import Collection

from cvs_tasks.tasks._lifecycle import HELP, lifecycle_task, request, stage_task

LAUNCH_HELP = dict(HELP, combo="(chaining) launch only if one of these combos still has to train")


@lifecycle_task("launch_container", default=True, help=LAUNCH_HELP, iterable=["combo"])
def launch(c, config=None, cluster=None, run=None, suite=None, combo=None, force=False, dry_run=False, reports_dir=None):
    """Launch and verify the container on all hosts (test_launch_container)."""
    stage_task(c, "launch_container", request(c, config, cluster, run, suite, dry_run, force, reports_dir), combos=combo)


ns = Collection("container", launch)
