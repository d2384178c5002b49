"""The invoke collection: one namespace per lifecycle stage plus the tool namespaces.

`invoke --list` reads like a table of contents of the lifecycle.
"""

from __future__ import annotations

from invoke import Collection


def namespace() -> Collection:
    from cvs_tasks.tasks import (
        bench,
        cleanup,
        cluster,
        compare,
        config,
        diagnose,
        history,
        lifecycle,
        logs,
        report,
        testbed,
        thresholds,
    )
    from cvs_tasks.tasks._common import INVOKE_DEFAULTS
    from cvs_tasks.tasks.stages import stage_collections

    ns = Collection()
    ns.configure(INVOKE_DEFAULTS)  # `cvs:` keys invoke.yaml / INVOKE_CVS_* may set
    ns.add_task(lifecycle.all_)
    ns.add_task(lifecycle.demo)
    ns.add_task(bench.bench)
    ns.add_task(compare.compare)
    ns.add_task(diagnose.diagnose)
    for collection in stage_collections():  # container, tokenizer, smoke, ... teardown
        ns.add_collection(collection)
    for module in (report, config, cluster, cleanup, logs, history, thresholds, testbed):
        ns.add_collection(module.ns)
    return ns
