"""`invoke teardown`: remove the run's containers and node files."""

from invoke import Collection

from cvs_tasks.tasks._lifecycle import NO_COMBO, lifecycle_task, request, stage_task


@lifecycle_task("teardown", default=True, help=NO_COMBO)
def run(c, config=None, cluster=None, run=None, suite=None, force=False, dry_run=False, reports_dir=None):
    """Tear the container down on every node and delete the run's scripts and token file (test_teardown)."""
    req = request(c, config, cluster, run, suite, dry_run, force, reports_dir)
    req.check_config = False  # tearing down must work even after the config was edited
    stage_task(c, "teardown", req)


ns = Collection("teardown", run)
