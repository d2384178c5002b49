"""What `invoke history`, `invoke history.rebuild`, `invoke compare` and `invoke thresholds.calibrate`
do and show, behind thin tasks.

An unreadable history is exit 3 for the commands that only read it (`history`, `thresholds.calibrate`)
and a warning for `compare`, which then reads the runs from their run directories.

The console view is rich tables (JSON is the record). Run ids, configs, kernel versions and other
node facts are node text: every cell is ``cell`` text (no markup, control characters shown;
``cvs_tasks.terminal``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from rich.console import Console
from rich.table import Table
from rich.text import Text

from cvs_tasks.errors import BadInput, InfraError
from cvs_tasks.history.compare import Comparison, compare
from cvs_tasks.history.db import HistoryUnavailable, history_path, present, reading
from cvs_tasks.history.entry import RunEntry, cluster_key, entry_from_run
from cvs_tasks.history.store import RunFilter, find_run_id, load_entry, passing_runs, rebuild, recent_runs
from cvs_tasks.run.rundir import RunDir, write_json_atomic
from cvs_tasks.terminal import cell, make_console


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


# -- the console view ------------------------------------------------------------------------------
VERDICT_STYLE = {"PASS": "green", "FAIL": "bold red", "RECORD": "dim", "SKIPPED": "dim",
                 "-": "dim"}


def _verdict(text: str | None) -> Text:
    text = text or "-"
    return cell(text, VERDICT_STYLE.get(text, ""))


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.4g}" if abs(v) < 1e4 else f"{v:,.0f}"


def when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "-"


def runs_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title=f"history: {len(rows)} run(s), newest first", title_justify="left")
    for col in ("run", "started", "verdict", "suite", "nodes", "config", "combos"):
        table.add_column(col, overflow="fold")
    for r in rows:
        combos = Text()
        for i, (combo, verdict) in enumerate(r["combos"].items()):
            combos.append_text(cell(("  " if i else "") + combo + " "))
            combos.append_text(_verdict(verdict))
        config = (r.get("config_file") or "").rsplit("/", 1)[-1] + f" [{r['config_hash'][:8]}]"
        table.add_row(cell(r["run_id"]), cell(when(r["started"])), _verdict(r["verdict"]),
                      cell(f"{r['suite']} {r['backend']}"), cell(len(r["hosts"])), cell(config), combos)
    return table


def comparison_tables(cmp: Comparison) -> list[Table]:
    a, b = cmp.a, cmp.b
    head = Table(title=cell(f"compare {a.run_id} -> {b.run_id}"), title_justify="left", show_header=False)
    head.add_column("")
    head.add_column("A")
    head.add_column("B")
    head.add_row("verdict", _verdict(a.verdict), _verdict(b.verdict))
    head.add_row("started", cell(when(a.started)), cell(when(b.started)))
    head.add_row("config", cell(a.config_hash), cell(b.config_hash))
    head.add_row("image digest", cell(a.image_digest or "-"), cell(b.image_digest or "-"))
    head.add_row("provenance", cell(a.provenance), cell(b.provenance, "" if cmp.same_provenance else "yellow"))
    metrics = Table(title="metrics (delta = B - A)", title_justify="left")
    for col, just in (("combo", "left"), ("metric", "left"), ("A", "right"), ("B", "right"),
                      ("delta", "right"), ("%", "right"), ("A verdict", "left"), ("B verdict", "left")):
        metrics.add_column(col, justify=just)
    for m in cmp.metrics:
        pct = "-" if m.pct is None else f"{m.pct:+.1f}%"
        style = "bold" if m.pct is not None and abs(m.pct) >= 5 else ""
        name = m.metric.removeprefix("training.")
        metrics.add_row(cell(m.combo), cell(f"{name} ({m.unit})" if m.unit else name), cell(_num(m.a)),
                        cell(_num(m.b)), cell("-" if m.delta is None else f"{m.delta:+.4g}"), cell(pct, style),
                        _verdict(m.status_a), _verdict(m.status_b))
    nodes = Table(title="node fingerprints that differ" if cmp.nodes else "node fingerprints: no difference",
                  title_justify="left")
    for col in ("node", "fact", "A", "B"):
        nodes.add_column(col)
    for n in cmp.nodes:
        nodes.add_row(cell(n.host), cell(n.fact), cell(n.a if n.a is not None else "-"),
                      cell(n.b if n.b is not None else "-"))
    return [head, metrics, nodes]
