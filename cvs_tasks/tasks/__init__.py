"""The invoke collection: one namespace per lifecycle stage plus the tool namespaces.

`invoke --list` reads like a table of contents of the lifecycle.
"""

from __future__ import annotations

from invoke import Collection


def namespace() -> Collection:
    from cvs_tasks.tasks import bench, cleanup, cluster, config, history, lifecycle, logs, report, testbed
    from cvs_tasks.tasks._common import INVOKE_DEFAULTS

    ns = Collection()
    ns.configure(INVOKE_DEFAULTS)  # `cvs:` keys invoke.yaml / INVOKE_CVS_* may set
    ns.add_task(lifecycle.all_)
    ns.add_task(lifecycle.demo)
    ns.add_task(bench.bench)
    ns.add_task(history.compare)
    ns.add_task(lifecycle.diagnose)
    for collection in lifecycle.stage_collections():  # container, tokenizer, smoke, ... teardown
        ns.add_collection(collection)
    for collection in (report.ns, config.ns, cluster.ns, cleanup.ns, logs.ns, history.ns, history.thresholds_ns,
                       testbed.ns):
        ns.add_collection(collection)
    return ns
