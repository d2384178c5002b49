"""`invoke diagnose`: the smoke cell on every node on its own, in parallel; names the bad node(s)."""

from __future__ import annotations

from invoke import task
from invoke.exceptions import Exit

from cvs_tasks.tasks._common import user_errors
from cvs_tasks.tasks._lifecycle import NO_COMBO, listener, request
from cvs_tasks.terminal import echo


@task(help={k: v for k, v in NO_COMBO.items() if k not in ("force", "dry_run")})
def diagnose(c, config=None, cluster=None, run=None, suite=None, reports_dir=None):
    """Smoke-test every node alone, in parallel; name outliers (failure, or step time/throughput off the median)."""
    from cvs_tasks.lifecycle.diagnose import run_diagnose
    from cvs_tasks.lifecycle.flow import close_sessions, session_for
    from cvs_tasks.report import build_results
    from cvs_tasks.report.console import print_summary
    from cvs_tasks.run.stages import DIAGNOSE

    with user_errors():
        events = listener()
        with events:
            session = session_for(request(c, config, cluster, run, suite, False, False, reports_dir, new=run is None),
                                  events)
            try:
                code = run_diagnose(session)
            finally:
                close_sessions()
        record = session.run.read_record(DIAGNOSE)
        print_summary(build_results(session.run), run_dir=session.run.path)
        if record is not None:
            echo(f"diagnose: {record.status}: {record.reason}",
                 f"failing nodes: {session.run.path / 'failing_nodes.txt'}")
    if code:
        raise Exit(code=code)
