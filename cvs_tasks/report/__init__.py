"""Reports of a run: results.json, report.html, metrics.html, junit.xml and the console view.

Everything is rendered from the run directory alone, so any run can be re-rendered at any time.
"""

from cvs_tasks.report.console import make_console_listener, print_summary
from cvs_tasks.report.render import render_all
from cvs_tasks.report.results import build_results

__all__ = ["build_results", "make_console_listener", "print_summary", "render_all"]
