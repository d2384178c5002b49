"""What `invoke history`, `invoke history.rebuild`, `invoke compare` and `invoke thresholds.calibrate`
do and show, behind thin tasks.

An unreadable history is exit 3 for the commands that only read it (`history`, `thresholds.calibrate`)
and a warning for `compare`, which then reads the runs from their run directories. A history not
yet created is no failure: `history` says so in one line (exit 0), `thresholds.calibrate` that it
has no passing runs (exit 2).

Console views are tables only when every run id, test or combo fits whole beside a usable reason
column; otherwise lines (``report.console.table_fits``).

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
from typing import Any, Callable, Iterator, Mapping

from rich.console import Console
from rich.table import Table
from rich.text import Text

from cvs_tasks.errors import BadInput, InfraError
from cvs_tasks.history.compare import Comparison, compare
from cvs_tasks.history.db import HistoryUnavailable, history_path, present, reading
from cvs_tasks.history.entry import RunEntry, cluster_key, entry_from_run
from cvs_tasks.history.store import RunFilter, find_run_id, load_entry, passing_runs, rebuild, recent_runs
from cvs_tasks.report.console import REASON_MIN, table_fits
from cvs_tasks.report.formatting import plural
from cvs_tasks.run.rundir import RunDir, write_json_atomic
from cvs_tasks.terminal import cell, line, make_console


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


VERDICTS = ("PASS", "FAIL", "RECORD", "SKIPPED", "NOT-RUN")
NO_RUNS_HINT = "runs are recorded as their commands end; `invoke history.rebuild` imports existing run directories"


def show_history(reports_root: Path, history: str | None, filt: RunFilter, *, as_json: bool,
                 console: Console | None = None) -> list[dict]:
    """The recent runs; an empty or not yet created history is one line (``[]`` with --json), not
    an error: nothing has failed. A history that is there but unreadable is InfraError (exit 3)."""
    if filt.verdict and filt.verdict.upper() not in VERDICTS:
        raise BadInput(f"--verdict {filt.verdict!r}: use one of {', '.join(VERDICTS)}")
    path = history_path(reports_root, history)
    rows: list[dict] = []
    if present(path):
        with _reading(reports_root, history) as conn:
            rows = recent_runs(conn, filt)
    if as_json:
        print(json.dumps(rows, indent=2, default=str))
        return rows
    console = console or make_console()
    if not rows:
        filtered = any(v for v in (filt.config, filt.cluster, filt.combo, filt.verdict))
        console.print(cell(f"history {path}: " + ("no run matches the filters" if filtered and present(path)
                                                  else f"no runs recorded yet ({NO_RUNS_HINT})")), soft_wrap=True)
        return rows
    for renderable in runs_view(rows, console.width):
        console.print(renderable, soft_wrap=True)
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
        for renderable in comparison_view(cmp, console.width):
            console.print(renderable, soft_wrap=True)
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
    found: list[dict] = []
    if present(history_path(reports_root, history)):  # none yet is zero runs (exit 2), not a broken history
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


RUN_HEADERS = ("run", "started", "verdict", "suite", "config", "combo", "combo verdict")


def _run_cells(r: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """One row per combo of a run (the run's own cells on its first row); a run without combos is one row."""
    config = (r.get("config_file") or "").rsplit("/", 1)[-1] + f" [{str(r.get('config_hash') or '')[:8]}]"
    suite = f"{r.get('suite')} {r.get('backend')}, {plural(len(r.get('hosts') or []), 'node')}"
    head = (str(r["run_id"]), when(r.get("started")), str(r.get("verdict") or "-"), suite, config)
    combos = list((r.get("combos") or {}).items()) or [("-", "-")]
    return [(*(head if i == 0 else ("",) * len(head)), str(combo), str(verdict or "-"))
            for i, (combo, verdict) in enumerate(combos)]


def _reasons(r: Mapping[str, Any]) -> list[str]:
    """The reason column: the run's verdict reason on its first row, then each combo's own reason."""
    combo_reasons = r.get("combo_reasons") or {}
    combos = list(r.get("combos") or {}) or ["-"]
    first = str(r.get("verdict_reason") or "")
    return [" · ".join(x for x in ((first if i == 0 else ""), combo_reasons.get(c, "")) if x)
            for i, c in enumerate(combos)]


def runs_view(rows: list[dict[str, Any]], width: int) -> list:
    """A table when every run id, config and combo fits whole beside a usable reason column, else a
    block of lines per run (a folded cell would cut a run id in CI logs)."""
    cells = [c for r in rows for c in _run_cells(r)]
    if table_fits(RUN_HEADERS, cells, width, fold_min=REASON_MIN):
        return [runs_table(rows)]
    return [cell(f"history: {len(rows)} run(s), newest first")] + [text for r in rows for text in run_lines(r)]


def runs_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title=f"history: {len(rows)} run(s), newest first", title_justify="left")
    for col in RUN_HEADERS:
        table.add_column(col, no_wrap=True)
    table.add_column("reason", overflow="fold")
    for r in rows:
        for cells, reason in zip(_run_cells(r), _reasons(r)):
            table.add_row(*(_verdict(c) if i in (2, 6) and c else cell(c) for i, c in enumerate(cells)), cell(reason))
    return table


def run_lines(r: Mapping[str, Any]) -> list[Text]:
    """A run as lines: id, time, verdict and why; suite and config; a line per combo with its verdict and reason."""
    run_id, started, verdict, suite, config, *_ = _run_cells(r)[0]
    reason = str(r.get("verdict_reason") or "")
    out = [line(run_id, "  ", started, "  ", _verdict(verdict), f" - {reason}" if reason else ""),
           cell(f"  {suite}; {config}")]
    combo_reasons = r.get("combo_reasons") or {}
    for combo, combo_verdict in (r.get("combos") or {}).items():
        why = combo_reasons.get(combo) or ""
        out.append(line("  ", combo, " ", _verdict(combo_verdict), f" - {why}" if why else ""))
    return out


COMPARE_HEADERS = ("combo", "metric", "A", "A bound", "A verdict", "B", "B bound", "B verdict", "delta", "%")


def comparison_view(cmp: Comparison, width: int) -> list:
    """The two runs' facts, every metric with both values, both bounds and both verdicts, and the
    node facts that differ: tables when they fit ``width``, else lines."""
    a, b = cmp.a, cmp.b
    facts = [("verdict", a.verdict, b.verdict), ("started", when(a.started), when(b.started)),
             ("config", a.config_hash, b.config_hash), ("image digest", a.image_digest or "-", b.image_digest or "-"),
             ("provenance", a.provenance, b.provenance)]
    out: list = []
    if table_fits(("", "A", "B"), [tuple(map(str, f)) for f in facts], width):
        out.append(compare_head_table(cmp, facts))
    else:
        out.append(cell(f"compare A {a.run_id} -> B {b.run_id}"))
        out += [line(f"  {label}: A ", _verdict(va) if label == "verdict" else str(va), " / B ",
                     _verdict(vb) if label == "verdict" else str(vb)) for label, va, vb in facts]
    rows = [_metric_cells(m) for m in cmp.metrics]
    if table_fits(COMPARE_HEADERS, rows, width):
        out.append(compare_metrics_table(cmp.metrics, rows))
    else:
        out.append(cell("metrics (delta = B - A), each value with the bound it was judged against:"))
        out += [metric_line(m) for m in cmp.metrics]
    node_rows = [(n.host, n.fact, str(n.a if n.a is not None else "-"), str(n.b if n.b is not None else "-"))
                 for n in cmp.nodes]
    title = "node fingerprints that differ" if cmp.nodes else "node fingerprints: no difference"
    if not node_rows:
        out.append(cell(title))
    elif table_fits(("node", "fact", "A", "B"), node_rows, width):
        nodes = Table(title=title, title_justify="left")
        for col in ("node", "fact", "A", "B"):
            nodes.add_column(col, no_wrap=True)
        for row in node_rows:
            nodes.add_row(*(cell(c) for c in row))
        out.append(nodes)
    else:
        out.append(cell(title + ":"))
        out += [cell(f"  {host} {fact}: A {va} / B {vb}") for host, fact, va, vb in node_rows]
    return out


def comparison_tables(cmp: Comparison) -> list:
    """The comparison as tables whatever their width (a console of any width: ``comparison_view``)."""
    return comparison_view(cmp, 10**6)


def compare_head_table(cmp: Comparison, facts: list[tuple[str, Any, Any]]) -> Table:
    head = Table(title=cell(f"compare {cmp.a.run_id} -> {cmp.b.run_id}"), title_justify="left", show_header=False)
    for col in ("", "A", "B"):
        head.add_column(col, no_wrap=True)
    for label, va, vb in facts:
        if label == "verdict":
            head.add_row(cell(label), _verdict(va), _verdict(vb))
        else:
            changed = label == "provenance" and not cmp.same_provenance
            head.add_row(cell(label), cell(va), cell(vb, "yellow" if changed else ""))
    return head


def _metric_name(m) -> str:
    name = m.metric.removeprefix("training.")
    return f"{name} ({m.unit})" if m.unit else name


def _metric_cells(m) -> tuple[str, ...]:
    pct = "-" if m.pct is None else f"{m.pct:+.1f}%"
    return (m.combo, _metric_name(m), _num(m.a), m.expected_a, m.status_a, _num(m.b), m.expected_b, m.status_b,
            "-" if m.delta is None else f"{m.delta:+.4g}", pct)


def compare_metrics_table(metrics: list, rows: list[tuple[str, ...]]) -> Table:
    table = Table(title="metrics (delta = B - A)", title_justify="left")
    for col in COMPARE_HEADERS:
        table.add_column(col, justify="right" if col in ("A", "B", "delta", "%") else "left", no_wrap=True)
    for m, row in zip(metrics, rows):
        big = m.pct is not None and abs(m.pct) >= 5
        table.add_row(*(_verdict(c) if i in (4, 7) else
                        cell(c, ("yellow" if m.bound_changed else "") if i == 6 else "bold" if i == 9 and big else "")
                        for i, c in enumerate(row)))
    return table


def metric_line(m) -> Text:
    """``  combo metric (unit): A 500 PASS (>= 400) -> B 400 FAIL (>= 450); -100 (-20.0%); bound changed``"""
    pct = "" if m.pct is None else f" ({m.pct:+.1f}%)"
    delta = "" if m.delta is None else f"; {m.delta:+.4g}{pct}"
    return line(f"  {m.combo} {_metric_name(m)}: A {_num(m.a)} ", _verdict(m.status_a), f" ({m.expected_a}) -> B "
                f"{_num(m.b)} ", _verdict(m.status_b), f" ({m.expected_b}){delta}",
                ("; bound changed", "yellow") if m.bound_changed else "")
