"""Top-level `invoke all` (the whole lifecycle) and `invoke demo` (the same on this machine)."""

from invoke import task
from invoke.exceptions import Exit

from cvs_tasks.tasks._common import user_errors
from cvs_tasks.tasks._lifecycle import HELP, NO_COMBO, listener, request


def _run_all(req) -> int:
    from cvs_tasks.lifecycle.flow import close_sessions, run_all, session_for
    from cvs_tasks.report import build_results
    from cvs_tasks.report.console import print_summary

    with user_errors():
        events = listener()
        with events:
            session = session_for(req, events)
            try:
                code = run_all(session)
            finally:
                close_sessions()
        if not req.dry_run:
            print_summary(build_results(session.run), run_dir=session.run.path)
    return code


@task(name="all", help=NO_COMBO)
def all_(c, config=None, cluster=None, run=None, suite=None, force=False, dry_run=False, reports_dir=None):
    # implicit concatenation: still the docstring, and `invoke --list` keeps showing it as one line
    ("Run every stage in order (launch, tokenizer, smoke, checkpoint, train, metric, loss), "
     "always tear down, report.")
    code = _run_all(request(c, config, cluster, run, suite, dry_run, force, reports_dir, new=run is None))
    if code:
        raise Exit(code=code)


@task(help={"reports_dir": HELP["reports_dir"], "run": "Run id or path (default: a new run)"})
def demo(c, run=None, reports_dir=None):
    """The whole lifecycle on this machine: simulated trainer, host runtime, localhost; ends in a report."""
    from cvs_tasks.templates import template_dir

    config = template_dir("configs") / "testbed" / "demo_host.json"
    cluster = template_dir("cluster") / "localhost.json"
    code = _run_all(request(c, str(config), str(cluster), run, None, False, False, reports_dir, new=run is None))
    if code:
        raise Exit(code=code)
