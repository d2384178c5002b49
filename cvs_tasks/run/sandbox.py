"""A run directory is a sandbox: what it holds is data, and no path in it leads outside.

Records and the manifest name files by paths relative to the run directory. A tampered run
directory (copied from elsewhere, edited by hand) may hold an absolute path, a ``..``, a
``javascript:`` link or a symlink to a file outside. Every reader resolves such a name here
(``inside`` / ``open_inside``), every link in a report is built here (``href``), and every file
the harness writes into a run directory is opened here (``open_for_write``): never through a
symlink, never in a folder that leads outside.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import quote

from cvs_tasks.errors import BadInput
from cvs_tasks.inputs import InputRefused, open_regular

MAX_PATH = 4096


def relative_problem(rel: Any) -> str | None:
    """Why ``rel`` is not a plain relative path inside a run directory, or None when it is."""
    if not isinstance(rel, str) or not rel:
        return "not a path (a non-empty string relative to the run directory)"
    if len(rel) > MAX_PATH:
        return f"longer than {MAX_PATH} characters"
    if not (rel.isascii() and rel.isprintable()) and any(ord(ch) < 32 or ord(ch) == 127 for ch in rel):
        return "holds a control character"
    if "\\" in rel:
        return "holds a backslash"
    if rel.startswith("/") or Path(rel).is_absolute():
        return "an absolute path (paths in a run directory are relative to it)"
    parts = rel.split("/")
    if ".." in parts:
        return "climbs out of the run directory with '..'"
    if ":" in parts[0]:
        return "looks like a URL (a 'scheme:' prefix), not a file of the run directory"
    return None


def inside(root: Path, rel: Any) -> Path | None:
    """The file ``rel`` names in ``root`` with every symlink resolved, when it stays inside; else None."""
    if relative_problem(rel) is not None:
        return None
    base = Path(root).resolve()
    try:
        target = (base / rel).resolve()
    except (OSError, RuntimeError):  # a symlink loop
        return None
    return target if target != base and target.is_relative_to(base) else None


def open_inside(root: Path, rel: Any, what: str) -> int:
    """A read-only fd on the regular file ``rel`` names inside ``root``; InputRefused (naming the
    file and why) for a path that is not plain, leads outside, or is not a regular file."""
    problem = relative_problem(rel)
    target = inside(root, rel) if problem is None else None
    if target is None:
        raise InputRefused(Path(root) / str(rel)[:200], f"{what}: {problem or 'leads outside the run directory'}")
    return open_regular(target, what)


def href(rel: Any) -> str:
    """``rel`` as a relative link for a report page (percent-encoded, so no scheme can survive), or
    "" when it is not a plain path inside the run directory."""
    return quote(rel, safe="/") if relative_problem(rel) is None else ""


def make_dirs(root: Path, folder: Path) -> None:
    """Create ``folder`` (inside ``root``) and its parents, refusing any part that is a symlink or
    not a folder: a tampered run directory cannot send a write elsewhere. BadInput when refused."""
    base = Path(root)
    try:
        parts = Path(folder).relative_to(base).parts
    except ValueError:
        raise BadInput(f"{folder}: not inside the run directory {base}") from None
    current = base
    for part in parts:
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            try:
                os.mkdir(current)
            except FileExistsError:
                pass
            except OSError as exc:
                raise BadInput(f"cannot create {current}: {exc.strerror or exc}") from None
            info = os.lstat(current)
        if not stat.S_ISDIR(info.st_mode):
            kind = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a folder"
            raise BadInput(f"{current}: {kind} inside the run directory {base}; the harness writes only into "
                           "its own folders (remove it, or start a new run)")


def open_for_write(path: Path, root: Path | None = None) -> BinaryIO:
    """``path`` as a new empty file opened for writing. What was there is unlinked first, never
    written through: a symlink or a hard link to a file elsewhere, a FIFO. With ``root``, its
    folders are made by ``make_dirs``."""
    path = Path(path)
    if root is not None:
        make_dirs(root, path.parent)
    try:
        if not os.path.isdir(path) or os.path.islink(path):
            path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
    except FileExistsError:  # planted between the unlink and the open
        raise BadInput(f"{path}: exists and cannot be replaced by a new file (a folder, or planted meanwhile); "
                       "the harness never writes through another file") from None
    return os.fdopen(fd, "wb")
