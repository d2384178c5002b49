"""What the user asked for on the command line: the run a lifecycle command acts on.

It lives in the run layer, below the lifecycle, so a task can build one (and have `--run`
refused) without importing the lifecycle code."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cvs_tasks.run.rundir import check_run_flag

DEFAULT_REPORTS = "reports"


@dataclass
class RunRequest:
    """All optional; a hostile ``run`` is refused here, at construction (BadInput, exit 2)."""

    config: str | None = None
    cluster: str | None = None
    run: str | None = None
    suite: str | None = None
    reports_dir: str | None = None
    new: bool = False  # `invoke all` without --run starts a new run
    check_config: bool = True  # teardown skips it: releasing nodes must work after an edit
    dry_run: bool = False
    force: bool = False

    def __post_init__(self) -> None:
        check_run_flag(self.run)

    @property
    def reports_root(self) -> Path:
        if self.run and os.sep in self.run:
            return Path(self.run).expanduser().resolve().parent
        return Path(self.reports_dir or os.environ.get("CVS_REPORTS_DIR") or DEFAULT_REPORTS)
