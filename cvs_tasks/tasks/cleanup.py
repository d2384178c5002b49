"""`invoke cleanup`: find and remove what killed runs left on the nodes (containers, jobs, folders)."""

from __future__ import annotations

from invoke import Collection

from cvs_tasks.errors import BadInput, InfraError
from cvs_tasks.tasks._common import configured, task, user_errors


@task(default=True, help={
    "cluster": "Cluster file whose nodes to clean",
    "config": "Suite config: adds the per-run node folders under paths.scripts_dir that carry the harness's "
              ".cvs-run marker (nothing else there is touched), their host-runtime jobs, a stale paths.log_dir lock",
    "run": "Only this run id (default: every run of yours — use it while none of your runs is in progress)",
    "all_owners": "Also other users' runs (containers labelled with another cvs.owner, "
                  "marked folders of another owner)",
    "dry_run": "Only list what would be removed, and what is kept and why",
})
def run(c, cluster=None, config=None, run=None, all_owners=False, dry_run=False):
    """List and remove leftovers of killed runs: labelled containers, host-runtime jobs, node folders."""
    from cvs_tasks.lifecycle.leftovers import cleanup

    with user_errors():
        cluster, config = configured(c, "cluster", cluster), configured(c, "config", config)
        if not cluster:
            raise BadInput("--cluster is required (or cvs.cluster in invoke.yaml / INVOKE_CVS_CLUSTER): "
                           "the cluster file of the nodes to clean")
        outcome = cleanup(cluster, config=config, run=run, all_owners=bool(all_owners), dry_run=bool(dry_run))
        if not outcome.ok:
            detail = outcome.problems + outcome.found.errors
            if outcome.remaining is not None:
                detail += [f"still there: {line}" for line in outcome.remaining.lines()]
            raise InfraError("clean-up incomplete:\n  " + "\n  ".join(detail))


ns = Collection("cleanup", run)
