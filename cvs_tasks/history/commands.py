"""What `invoke history`, `invoke history.rebuild` and `invoke compare` do, behind thin tasks.

An unreadable history is exit 3 for the commands that only read it (`history`, `thresholds.calibrate`)
and a warning for `compare`, which then reads the runs from their run directories.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from rich.console import Console

from cvs_tasks.errors import BadInput, InfraError
from cvs_tasks.history.compare import compare
from cvs_tasks.history.db import HistoryUnavailable, history_path, present, reading
from cvs_tasks.history.entry import RunEntry, entry_from_run
from cvs_tasks.history.queries import RunFilter, find_run_id, load_entry, recent_runs
from cvs_tasks.history.store import rebuild
from cvs_tasks.history.tables import comparison_tables, runs_table
from cvs_tasks.run.rundir import RunDir
from cvs_tasks.terminal import make_console


@contextmanager
def _reading(reports_root: Path, history: str | None) -> Iterator:
    """The history for a command that only reads it: missing or unreadable is InfraError (exit 3)."""
    path = history_path(reports_root, history)
    try:
        with reading(path) as conn:
            yield conn
    except HistoryUnavailable as exc:
        raise InfraError(f"history unreadable: {exc}" if present(path) else str(exc)) from None


def _stderr(text: str) -> None:
    print(text, file=sys.stderr)


VERDICTS = ("PASS", "FAIL", "RECORD", "SKIPPED")


def show_history(reports_root: Path, history: str | None, filt: RunFilter, *, as_json: bool,
                 console: Console | None = None) -> list[dict]:
    if filt.verdict and filt.verdict.upper() not in VERDICTS:
        raise BadInput(f"--verdict {filt.verdict!r}: use one of {', '.join(VERDICTS)}")
    with _reading(reports_root, history) as conn:
        rows = recent_runs(conn, filt)
    if as_json:
        print(json.dumps(rows, indent=2, default=str))
    else:
        (console or make_console()).print(runs_table(rows))
    return rows


def resolve_entries(reports_root: Path, history: str | None, texts: list[str],
                    warn: Callable[[str], None] = _stderr) -> list[RunEntry]:
    """Each run from the history (id or unique prefix), else read from its run directory. A history
    that is there but unreadable is a warning: the run directories hold everything compared."""
    path = history_path(reports_root, history)
    found: list[RunEntry | None] = [None] * len(texts)
    if present(path):
        try:
            with reading(path) as conn:
                for i, text in enumerate(texts):
                    run_id = find_run_id(conn, text)
                    found[i] = load_entry(conn, run_id) if run_id else None
        except HistoryUnavailable as exc:
            warn(f"warning: history unreadable: {exc}; reading the runs from their run directories")
    return [entry or _from_run_dir(reports_root, history, text) for entry, text in zip(found, texts)]


def _from_run_dir(reports_root: Path, history: str | None, text: str) -> RunEntry:
    try:
        return entry_from_run(RunDir.resolve(reports_root, text))
    except BadInput:
        raise BadInput(f"run {text!r} is neither in the history ({history_path(reports_root, history)}) "
                       f"nor a run directory under {reports_root}; see `invoke history`") from None


def show_compare(reports_root: Path, history: str | None, run_a: str, run_b: str, *, as_json: bool,
                 console: Console | None = None, warn: Callable[[str], None] = _stderr) -> dict:
    cmp = compare(*resolve_entries(reports_root, history, [run_a, run_b], warn))
    data = cmp.to_dict()
    if as_json:
        print(json.dumps(data, indent=2, default=str))
    else:
        console = console or make_console()
        for table in comparison_tables(cmp):
            console.print(table)
    return data


def rebuild_history(reports_root: Path, history: str | None) -> tuple[int, list[str], Path]:
    path = history_path(reports_root, history)
    count, problems = rebuild(reports_root, path)
    return count, problems, path


def calibrate_thresholds(reports_root: Path, history: str | None, *, config: str, cluster: str, output: str,
                         runs: int, margin_pct: float, min_runs: int, force: bool = False) -> tuple[Path, dict]:
    """Write a threshold file from the last ``runs`` passing runs of ``config`` on ``cluster``; an
    existing ``output`` is refused (BadInput) unless ``force``: it may be a hand-tuned file."""
    from cvs_tasks.config import load_cluster
    from cvs_tasks.history.calibrate import calibrated_file
    from cvs_tasks.history.entry import cluster_key
    from cvs_tasks.history.queries import passing_runs

    out = Path(output)
    if not force:
        _refuse_existing(out)
    spec = load_cluster(Path(cluster))
    key = cluster_key([h.address for h in spec.hosts])
    config_file = str(Path(config).resolve())
    with _reading(reports_root, history) as conn:
        found = passing_runs(conn, config_file=config_file, cluster=key, limit=runs)
    if len(found) < min_runs:
        raise BadInput(f"only {len(found)} passing run(s) of {config_file} on {key} in the history "
                       f"({history_path(reports_root, history)}); calibration needs {min_runs}. Run the suite "
                       "(with enforce_thresholds false until then) and try again.")
    data = calibrated_file(found, margin_pct=margin_pct, min_runs=min_runs,
                           source={"config_file": config_file, "cluster": key})
    _write(out, data, force)
    return out, data


def _refuse_existing(out: Path) -> None:
    if out.exists() or out.is_symlink():
        raise BadInput(f"{out} exists; thresholds.calibrate does not overwrite a threshold file (it may be "
                       "hand-tuned): pass --force to replace it, or choose another --output")


def _write(out: Path, data: dict, force: bool) -> None:
    """Atomically; without ``force`` by a hard link, which fails when the file appeared meanwhile."""
    from cvs_tasks.run.rundir import write_json_atomic

    if force:
        write_json_atomic(out, data)
        return
    tmp = out.with_name(f".{out.name}.{os.getpid()}.calibrate")
    write_json_atomic(tmp, data)
    try:
        os.link(tmp, out)
    except FileExistsError:
        _refuse_existing(out)
    except OSError:  # a file system without hard links: the check above is the guard
        _refuse_existing(out)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
