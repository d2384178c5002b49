"""Ways a history database can be damaged or out of reach, built on a real database file."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

from cvs_tasks.history.db import open_db

DAMAGE = ("garbage", "truncated", "directory", "wrong_schema", "fifo", "unopenable", "permission")


def healthy_bytes(tmp: Path) -> bytes:
    """A migrated, empty history database as bytes (several pages: schema and indexes)."""
    path = tmp / "healthy.sqlite"
    open_db(path).close()
    return path.read_bytes()


def damage(db: Path, kind: str, healthy: bytes) -> Path:
    """Put a damaged ``kind`` of database at ``db`` (or, for ``unopenable``, return a path that cannot be
    opened); returns the path to hand the reader."""
    for suffix in ("", "-wal", "-shm"):
        old = Path(f"{db}{suffix}")
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old)
        elif old.exists() or old.is_symlink():
            old.unlink()
    db.parent.mkdir(parents=True, exist_ok=True)
    if kind == "garbage":
        db.write_bytes(bytes(range(256)) * 32)
    elif kind == "truncated":
        db.write_bytes(healthy[: len(healthy) // 3])
    elif kind == "directory":
        db.mkdir()
    elif kind == "wrong_schema":  # the current schema version, tables of something else
        conn = sqlite3.connect(db)
        conn.executescript("CREATE TABLE runs (x); CREATE TABLE metrics (y); PRAGMA user_version = 1;")
        conn.close()
    elif kind == "fifo":
        os.mkfifo(db)
    elif kind == "unopenable":  # a folder of the path is a file
        db.write_bytes(b"")
        return db / "history.sqlite"
    elif kind == "permission":
        db.write_bytes(healthy)
        db.chmod(0)
    else:
        raise ValueError(kind)
    return db


def root_ignores_permissions() -> bool:
    return os.geteuid() == 0
