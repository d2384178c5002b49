"""The run history: every finished run in an embedded SQLite database (``reports/history.sqlite``).

The run directory stays the source of truth; the history is an index over runs that makes
"is it as good as last week?", "which node changed?" and "which node is the bad one?" cheap to
answer. A broken or locked database only ever costs a warning, never a run.
"""

from cvs_tasks.history.db import DEFAULT_DB_NAME, HistoryUnavailable, history_path, open_db
from cvs_tasks.history.entry import RunEntry, entry_from_run
from cvs_tasks.history.store import rebuild, record_run, record_run_safely

__all__ = [
    "DEFAULT_DB_NAME", "HistoryUnavailable", "RunEntry", "entry_from_run", "history_path", "open_db",
    "rebuild", "record_run", "record_run_safely",
]
