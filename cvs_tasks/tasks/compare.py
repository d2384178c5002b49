"""`invoke compare RUN_A RUN_B`: two runs side by side (metrics with delta and %, node fingerprints)."""

from __future__ import annotations

from invoke import task

from cvs_tasks.errors import BadInput
from cvs_tasks.tasks._common import reports_root, user_errors
from cvs_tasks.tasks.history import COMMON


@task(positional=["run_a", "run_b"], auto_shortflags=False,
      help={**COMMON, "run_a": "The earlier run (id, unique id prefix, or run directory)",
            "run_b": "The later run", "json": "Print JSON instead of tables"})
def compare(c, run_a=None, run_b=None, json=False, reports_dir=None, history=None):
    """Per combo and metric: both values, delta and %, both verdicts; per node: fingerprint differences."""
    from cvs_tasks.history.commands import show_compare

    with user_errors():
        if not run_a or not run_b:
            raise BadInput("compare needs two runs: invoke compare RUN_A RUN_B (see `invoke history`)")
        show_compare(reports_root(c, reports_dir), history, run_a, run_b, as_json=bool(json))
