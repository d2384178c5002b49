"""Opening the history database: WAL, a busy timeout, and the schema brought up to date.

The schema version lives in SQLite's ``user_version``; each migration is one row of
``MIGRATIONS`` and runs once, inside a transaction, so an old database is upgraded in place and a
newer one than this code knows is refused rather than misread.

The history is never needed to finish a run: every reader goes through ``reading``, which turns a
damaged file, a wrong schema, a directory in its place or a refused open into HistoryUnavailable,
and each command makes that a warning (or, for the commands that only read the history, an exit 3).
"""

from __future__ import annotations

import functools
import os
import sqlite3
import stat
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

DEFAULT_DB_NAME = "history.sqlite"
BUSY_TIMEOUT_MS = 10_000

MIGRATIONS: tuple[str, ...] = (
    # 1: runs, per-combo metrics, per-node fingerprints
    """
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        started REAL NOT NULL,
        finished REAL,
        cluster TEXT NOT NULL,
        hosts TEXT NOT NULL,
        config_hash TEXT NOT NULL,
        config_file TEXT,
        suite TEXT,
        backend TEXT,
        gpu_name TEXT,
        model_name TEXT,
        image TEXT,
        image_digest TEXT,
        verdict TEXT NOT NULL,
        verdict_reason TEXT,
        provenance TEXT,
        run_dir TEXT
    );
    CREATE INDEX runs_by_config ON runs(config_hash, cluster, started);
    CREATE INDEX runs_by_time ON runs(started);
    CREATE TABLE combos (
        run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        combo TEXT NOT NULL,
        training TEXT,
        verdict TEXT,
        args_hash TEXT,
        provenance TEXT,
        PRIMARY KEY (run_id, combo)
    );
    CREATE TABLE metrics (
        run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        combo TEXT NOT NULL,
        name TEXT NOT NULL,
        value REAL,
        unit TEXT,
        expected TEXT,
        status TEXT,
        PRIMARY KEY (run_id, combo, name)
    );
    CREATE INDEX metrics_by_name ON metrics(combo, name);
    CREATE TABLE nodes (
        run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
        host TEXT NOT NULL,
        rank INTEGER,
        status TEXT,
        facts TEXT NOT NULL,
        PRIMARY KEY (run_id, host)
    );
    """,
    # 2: why a combo did not pass (history's reason column)
    """
    ALTER TABLE combos ADD COLUMN reason TEXT;
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


class HistoryUnavailable(Exception):
    """The database cannot be opened, read or written (corrupt, locked, newer schema, no disk)."""


REBUILD_HINT = "move it aside and run `invoke history.rebuild` to re-import the run directories"


def history_path(reports_root: Path, configured: str | None = None) -> Path:
    """``--history``/``$CVS_HISTORY_DB``/the config's ``history.path``, else ``<reports>/history.sqlite``."""
    chosen = configured or os.environ.get("CVS_HISTORY_DB")
    return Path(chosen).expanduser() if chosen else Path(reports_root) / DEFAULT_DB_NAME


def open_db(path: Path, *, create: bool = True) -> sqlite3.Connection:
    """A connection with WAL and a busy timeout, schema migrated; HistoryUnavailable otherwise."""
    path = Path(path)
    kind = _kind(path)
    if kind:
        raise HistoryUnavailable(f"history database {path} is {kind}, not a database file; {REBUILD_HINT}")
    if not create and not path.is_file():
        raise HistoryUnavailable(f"no history database at {path} (runs are recorded as they finish; "
                                 "`invoke history.rebuild` imports existing run directories)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    except (OSError, sqlite3.Error) as exc:
        raise HistoryUnavailable(f"cannot open history database {path}: {exc}") from None
    try:
        _set_up(conn, path)
    except sqlite3.Error as exc:
        conn.close()
        raise HistoryUnavailable(f"history database {path} is unusable ({exc}); {REBUILD_HINT}") from None
    except HistoryUnavailable:
        conn.close()
        raise
    return conn


@contextmanager
def reading(path: Path, *, create: bool = False) -> Iterator[sqlite3.Connection]:
    """A connection for queries; trouble opening it or reading from it (a damaged page, a table or
    column of another schema, a stored value that is not what this code wrote) is HistoryUnavailable."""
    conn = open_db(path, create=create)
    try:
        yield conn
    except (sqlite3.Error, ValueError, TypeError, KeyError, IndexError) as exc:
        raise HistoryUnavailable(f"history database {path} is unreadable ({type(exc).__name__}: {exc}); "
                                 f"{REBUILD_HINT}") from None
    finally:
        conn.close()


def present(path: Path) -> bool:
    """False only when nothing is at ``path`` (no history yet); True when something is there or the
    path cannot be looked at (a folder of it is a file, or refused): that one is reported, not skipped."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return True


def _kind(path: Path) -> str:
    """'a directory' (or another non-file) when something other than a regular file is at ``path``;
    HistoryUnavailable when the path cannot be looked at."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise HistoryUnavailable(f"cannot open history database {path}: {exc.strerror or exc}") from None
    if stat.S_ISREG(mode):
        return ""
    return "a directory" if stat.S_ISDIR(mode) else "not a regular file"


def _set_up(conn: sqlite3.Connection, path: Path) -> None:
    """WAL, foreign keys, schema. Switching a fresh file to WAL can report "locked" at once while
    another process creates the same file (SQLite skips the busy handler there): retry that, bounded
    by the busy timeout."""
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if 0 < version <= SCHEMA_VERSION:
        check_schema(conn, path, version)  # before anything is written: a foreign database is left as it was
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = 0.01
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA synchronous = NORMAL")
            migrate(conn, path)
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.2)


@functools.cache
def expected_columns(version: int = SCHEMA_VERSION) -> dict[str, frozenset[str]]:
    """Each table's columns as the first ``version`` of ``MIGRATIONS`` build them (derived, not listed twice)."""
    mem = sqlite3.connect(":memory:")
    try:
        for migration in MIGRATIONS[:version]:
            mem.executescript(migration)
        tables = [name for (name,) in mem.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: frozenset(row[1] for row in mem.execute(f"PRAGMA table_info({t})")) for t in tables}
    finally:
        mem.close()


def check_schema(conn: sqlite3.Connection, path: Path, version: int = SCHEMA_VERSION) -> None:
    """Refuse a database whose tables are not the ones this code writes at the version it claims
    (an older one is then migrated)."""
    for table, columns in expected_columns(version).items():
        missing = columns - {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if missing:
            named = ", ".join(sorted(missing)[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
            raise HistoryUnavailable(f"history database {path} is not a cvs-tasks history (table {table} lacks "
                                     f"{named}); {REBUILD_HINT}")


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Apply every migration past the database's ``user_version``, each in its own transaction."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise HistoryUnavailable(f"history database {path} has schema version {version}, newer than this "
                                 f"cvs-tasks understands ({SCHEMA_VERSION}); upgrade cvs-tasks or use another "
                                 "--history")
    for number in range(version, SCHEMA_VERSION):
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] != number:  # another process migrated
                conn.execute("ROLLBACK")
                continue
            for statement in MIGRATIONS[number].split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
