"""Live progress on the console, and the end-of-run summary.

On a terminal, one rich ``Live`` (never more than one per console: rich refuses nested lives)
shows each running stage: a row per node up to ``SUMMARY_ABOVE`` nodes (lines instead of a table
when the table would not fit the console), else a summary (``report.progress``: counts per state,
min / median / max step, failed and stalled nodes first, then the slowest) redrawn at most every
``LIVE_REFRESH_S``. When stdout is not a terminal (CI, ``tee``) rich would only write the last
frame, so plain lines are printed instead: a node's progress at most every few seconds unless its
state changes, or, above ``SUMMARY_ABOVE`` nodes, one summary line per stage per interval plus a
line for each node that fails or stalls (the first few; the summary counts the rest). Events may
arrive from worker threads; one lock serialises them. The console is a view; the run directory is
the record. Every string here may come from a node (a reason, a note, a host name), so it reaches
the console only as ``cell`` / ``line`` text (``cvs_tasks.terminal``: no markup, control characters
shown), on a ``make_console``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Sequence

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from cvs_tasks.report.first_failure import cause_text, failed_tests, where_text
from cvs_tasks.report.formatting import DASH, STATUS_COLOURS, fmt_duration, fmt_number, fmt_test_duration, plural
from cvs_tasks.report.progress import SUMMARY_ABOVE, TROUBLE, counts_text, node_text, steps_text, summarise
from cvs_tasks.report.progress import summary_line as progress_summary_line
from cvs_tasks.run.events import Message, NodeProgress, StageEvent
from cvs_tasks.run.records import test_name
from cvs_tasks.terminal import cell, line, make_console, visible

PLAIN_INTERVAL_S = 5.0
LIVE_REFRESH_S = 0.25  # a summarised stage is redrawn at most this often (a node failing redraws at once)
TROUBLE_LINES = 8  # plain output: lines for nodes that fail or stall, per stage, before only the summary counts
STATE_STYLES = {"starting": "dim", "running": "cyan", "done": "green", "failed": "bold red", "stalled": "yellow"}

StageKey = tuple[str, str | None]


@dataclass
class RunningStage:
    """What the console holds about one running stage."""

    started: float
    nodes: dict[tuple[str, int], NodeProgress] = field(default_factory=dict)
    printed: dict[tuple[str, int], tuple[float, str]] = field(default_factory=dict)  # plain: last line per node
    last_summary: float = 0.0  # plain: last summary line; live: last redraw
    trouble_lines: int = 0
    summarised: bool = False  # above SUMMARY_ABOVE nodes (``add``)

    def add(self, event: NodeProgress) -> NodeProgress | None:
        """Note a node's progress; returns its previous one. A stage is summarised once it has more
        than SUMMARY_ABOVE nodes, told by the count seen or by a rank past it (ranks start at 0)."""
        node = (event.host, event.rank)
        before = self.nodes.get(node)
        self.nodes[node] = event
        if not self.summarised and (len(self.nodes) > SUMMARY_ABOVE or event.rank >= SUMMARY_ABOVE):
            self.summarised = True
        return before


def make_console_listener(console: Console | None = None, *, live: bool | None = None) -> ConsoleListener:
    """A listener for NodeProgress/StageEvent; ``live`` defaults to "is this console a terminal"."""
    console = console or make_console()
    use_live = console.is_terminal if live is None else live
    return ConsoleListener(console, live=use_live)


class ConsoleListener:
    """Callable with events; use as a context manager so the live display starts and stops cleanly."""

    def __init__(
        self,
        console: Console,
        *,
        live: bool,
        interval_s: float = PLAIN_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console
        self.live = live
        self.interval_s = interval_s
        self._clock = clock
        self._lock = threading.RLock()
        self._running: dict[StageKey, RunningStage] = {}
        self._display: Live | None = None

    # -- lifecycle ------------------------------------------------------------------------------
    def __enter__(self) -> ConsoleListener:
        with self._lock:
            if self.live and self._display is None:
                self._display = Live(
                    self._renderable(), console=self.console, refresh_per_second=4, transient=True
                )
                self._display.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        with self._lock:
            if self._display is not None:
                self._display.stop()
                self._display = None

    # -- events ---------------------------------------------------------------------------------
    def __call__(self, event: object) -> None:
        with self._lock:
            if isinstance(event, StageEvent):
                self._on_stage(event)
            elif isinstance(event, Message):
                self._on_message(event)
            elif isinstance(event, NodeProgress):
                self._on_progress(event)

    def _on_stage(self, event: StageEvent) -> None:
        key = (event.stage, event.combo)
        if event.status is None:
            self._running[key] = RunningStage(started=self._clock())
            self.console.print(line((test_name(*key), "bold"), ": started"), soft_wrap=True)
        else:
            stage = self._running.pop(key, None)
            if stage is not None and stage.summarised and self._display is None:  # where the nodes ended
                self.console.print(cell(progress_summary_line(test_name(*key), summarise(stage.nodes.values()))),
                                   soft_wrap=True)
            self.console.print(stage_end_line(event), soft_wrap=True)
        self._refresh()

    def _on_message(self, event: Message) -> None:
        """A line from a stage (a dry-run command, a warning): printed above any live display."""
        style = {"warning": "yellow", "error": "bold red"}.get(event.level, "")
        self.console.print(cell(event.text, style), soft_wrap=True, highlight=False, markup=False)

    def _on_progress(self, event: NodeProgress) -> None:
        key = (event.stage, event.combo)
        stage = self._running.get(key)
        if stage is None:  # progress without a start event (a test, a stage started before the listener)
            stage = self._running[key] = RunningStage(started=self._clock())
        node = (event.host, event.rank)
        before = stage.add(event)
        now = self._clock()
        in_trouble = event.state in TROUBLE and (before is None or before.state != event.state)
        if self._display is not None:
            # a summarised stage is redrawn on a clock, sooner when a node fails (a whole job failing
            # at once is a burst of events: still a few redraws, not one per node)
            wait = LIVE_REFRESH_S / 10 if in_trouble else LIVE_REFRESH_S
            if not stage.summarised or now - stage.last_summary >= wait:
                stage.last_summary = now
                self._refresh()
            return
        if stage.summarised:
            self._plain_summarised(key, stage, event, in_trouble, now)
            return
        last = stage.printed.get(node)
        if last is None or last[1] != event.state or now - last[0] >= self.interval_s:
            stage.printed[node] = (now, event.state)
            self.console.print(cell(progress_line(event)), soft_wrap=True)

    def _plain_summarised(self, key: StageKey, stage: RunningStage, event: NodeProgress, in_trouble: bool,
                          now: float) -> None:
        """Above SUMMARY_ABOVE nodes: a line for a node that fails or stalls (the first few), and a
        summary line per interval."""
        if in_trouble and stage.trouble_lines < TROUBLE_LINES:
            stage.trouble_lines += 1
            self.console.print(cell(progress_line(event)), soft_wrap=True)
            if stage.trouble_lines == TROUBLE_LINES:
                self.console.print(cell(f"{test_name(*key)}: further failed or stalled nodes are counted in "
                                        "the summary lines"), soft_wrap=True)
        if now - max(stage.last_summary, stage.started) >= self.interval_s:
            stage.last_summary = now
            self.console.print(cell(progress_summary_line(test_name(*key), summarise(stage.nodes.values()))),
                               soft_wrap=True)

    # -- live view ------------------------------------------------------------------------------
    def _refresh(self) -> None:
        if self._display is not None:
            self._display.update(self._renderable(), refresh=True)

    def _renderable(self) -> Group:
        width = self.console.width
        return Group(*(stage_view(key, stage.nodes, width, summarised=stage.summarised)
                       for key, stage in self._running.items()))


PROGRESS_COLUMNS = (("Host", "left"), ("Rank", "right"), ("State", "left"), ("Step", "right"), ("Loss", "right"),
                    ("TFLOP/s", "right"), ("Elapsed", "right"), ("Note", "left"))


def stage_view(key: StageKey, nodes: Mapping[tuple[str, int], NodeProgress], width: int, *,
               summarised: bool | None = None):
    """A running stage on the live display: a row per node, or a line per node when that table is
    wider than the console, or a summary above SUMMARY_ABOVE nodes."""
    if summarised is None:
        summarised = len(nodes) > SUMMARY_ABOVE
    if summarised:
        return stage_summary(key, nodes)
    progress = sorted(nodes.values(), key=lambda p: (p.rank, p.host))
    if not table_fits([c for c, _ in PROGRESS_COLUMNS], [_progress_cells(p) for p in progress], width):
        return Group(cell(test_name(*key), "bold"), *(cell(progress_line(p)) for p in progress))
    return stage_table(key, nodes)


def stage_table(key: StageKey, nodes: Mapping[tuple[str, int], NodeProgress]) -> Table:
    """The live table of one running stage: a row per node."""
    table = Table(title=cell(test_name(*key)), title_justify="left", expand=False, header_style="bold")
    for column, justify in PROGRESS_COLUMNS:
        table.add_column(column, justify=justify, no_wrap=column != "Note")  # type: ignore[arg-type]
    for progress in sorted(nodes.values(), key=lambda p: (p.rank, p.host)):
        cells = _progress_cells(progress)
        table.add_row(*(cell(text, STATE_STYLES.get(progress.state, "") if i == 2 else "")
                        for i, text in enumerate(cells)))
    return table


def _progress_cells(progress: NodeProgress) -> tuple[str, ...]:
    return (visible(progress.host), str(progress.rank), progress.state, step_text(progress),
            fmt_number(progress.loss), fmt_number(progress.tflops), fmt_duration(progress.elapsed_s),
            visible(progress.note))


def stage_summary(key: StageKey, nodes: Mapping[tuple[str, int], NodeProgress]) -> Group:
    """A summarised stage: its counts and steps, then failed/stalled nodes, then the slowest."""
    summary = summarise(nodes.values())
    rows: list[Text] = [cell(test_name(*key), "bold"), cell(f"  {counts_text(summary)}")]
    if steps_text(summary):
        rows.append(cell(f"  {steps_text(summary)}"))
    for p in summary.trouble:
        rows.append(line("  ", (f"{p.state:<8}", STATE_STYLES.get(p.state, "")), node_text(p)))
    if summary.more_trouble:
        rows.append(cell(f"  and {summary.more_trouble} more failed or stalled", "bold red"))
    rows += [line("  ", ("slowest ", "yellow"), node_text(p)) for p in summary.slowest]
    return Group(*rows)


def step_text(progress: NodeProgress) -> str:
    if progress.step is None:
        return DASH
    return f"{progress.step}/{progress.total}" if progress.total else str(progress.step)


def progress_line(progress: NodeProgress) -> str:
    """One plain line for a node's progress (non-terminal output)."""
    parts = [f"{test_name(progress.stage, progress.combo)} {progress.host} (rank {progress.rank}): {progress.state}"]
    if progress.step is not None:
        parts.append(f"step {step_text(progress)}")
    if progress.loss is not None:
        parts.append(f"loss {fmt_number(progress.loss)}")
    if progress.tflops is not None:
        parts.append(f"TFLOP/s {fmt_number(progress.tflops)}")
    parts.append(f"elapsed {fmt_duration(progress.elapsed_s)}")
    if progress.note:
        parts.append(f"- {progress.note}")
    return " ".join(parts)


def stage_end_line(event: StageEvent) -> Text:
    status = event.status or ""
    return line((test_name(event.stage, event.combo), "bold"), ": ", (status, _status_style(status)),
                f" - {event.reason}" if event.reason else "")


def print_summary(results: Mapping[str, Any], console: Console | None = None, *, run_dir: Path | None = None) -> None:
    """End of a run: a row per test (a table when it fits the console, else a line per test, so a
    test name or run id is never cut), the verdict, one line per failure (test, node, cause, log
    line) and, given the run directory, the report's path."""
    console = console or make_console()
    title = cell(f"cvs-tasks run {results.get('run_id') or DASH}")
    tests = list(results.get("tests", []))
    if summary_table_fits(tests, console.width):
        console.print(summary_table(tests, title))
    else:
        console.print(title, soft_wrap=True)
        for test in tests:
            console.print(summary_line(test), soft_wrap=True)
    verdict = str(results.get("verdict", "FAIL"))
    console.print(
        line("Verdict: ", (verdict, _status_style(verdict)), f" - {results.get('verdict_reason', '')}"),
        soft_wrap=True,
    )
    if verdict != "PASS":
        for text in failure_lines(results, run_dir):
            console.print(text, soft_wrap=True)
    if run_dir is not None:
        report = Path(run_dir) / "report.html"
        where = f"Report: {report}" if report.is_file() else f"Run directory: {run_dir}"
        console.print(cell(where), soft_wrap=True)


SUMMARY_COLUMNS = ("Test", "Status", "Duration", "Reason")
REASON_MIN = 24  # the narrowest Reason column worth a table (it folds; test names never do)


def table_fits(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int, *, fold_min: int = 0) -> bool:
    """Does a rich table of these whole cells fit ``width``? ``fold_min``: the narrowest useful width
    of one more column that folds (a reason), 0 for none. Below that, print a line per row instead:
    a folded cell cuts a run id or a test name in two."""
    widest = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    columns = len(widest) + (1 if fold_min else 0)
    return sum(widest) + fold_min + 1 + 3 * columns <= width  # rich's box: an edge, padding and an edge each


def summary_table_fits(tests: Sequence[Mapping[str, Any]], width: int) -> bool:
    """Does a table with whole test names, statuses and durations leave the reason a usable column?"""
    return table_fits(SUMMARY_COLUMNS[:3], [_cells(t)[:3] for t in tests], width, fold_min=REASON_MIN)


def summary_table(tests: Sequence[Mapping[str, Any]], title: Text) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column("Test", no_wrap=True)
    table.add_column("Status", no_wrap=True)
    table.add_column("Duration", justify="right", no_wrap=True)
    table.add_column("Reason", overflow="fold")
    for test in tests:
        name, status, duration, reason = _cells(test)
        table.add_row(cell(name), cell(status, _status_style(status)), cell(duration), cell(reason))
    return table


def summary_line(test: Mapping[str, Any]) -> Text:
    """A test as one line (the list form of the summary table)."""
    name, status, duration, reason = _cells(test)
    return line((f"{status:<8}", _status_style(status)), name, f" {duration}", f" - {reason}" if reason else "")


def _cells(test: Mapping[str, Any]) -> tuple[str, str, str, str]:
    status = str(test.get("status", ""))
    return (visible(test.get("name", "")), status, fmt_test_duration(status, test.get("duration_s")),
            str(test.get("reason") or ""))


LINE_TEXT = 160  # characters of the failing log line on the last screen


def print_command_failures(results: Mapping[str, Any], names: Collection[str], console: Console | None = None, *,
                           run_dir: Path | None = None) -> None:
    """The last screen of a stage command that failed (`invoke train --combo X`): one line per
    failure among the tests it ran (``names``), as a whole run ends; earlier failures of the run are
    the report's."""
    console = console or make_console()
    for text in failure_lines(results, run_dir, only=names):
        console.print(text, soft_wrap=True)


def failure_lines(results: Mapping[str, Any], run_dir: Path | None = None, *,
                  only: Collection[str] | None = None) -> list[Text]:
    """One line per failed test: status, test, node and rank, cause, the node log at the line, the
    line itself; then one line for the tests never run. Node text is text (``line``), never markup.
    ``only``: just these tests' failures, and no NOT-RUN line (one command's part of a run)."""
    tests = results.get("tests", [])
    out = []
    for facts in failed_tests(tests, run_id=results.get("run_id")):
        if only is not None and facts["test"] not in only:
            continue
        where = where_text(facts)
        parts: list[object] = [(f"{facts['status']} ", _status_style(str(facts["status"]))), str(facts["test"])]
        parts.append(f" on {where}: " if where else ": ")
        parts.append(cause_text(facts))
        log = facts.get("log") or facts.get("stage_log")
        if log:
            at = f"{Path(run_dir) / log if run_dir is not None else log}"
            parts.append(f" at {at}:{facts['line_no']}" if facts.get("line_no") else f"; log {at}")
        if facts.get("line"):
            text = str(facts["line"])
            parts.append(": " + (text if len(text) <= LINE_TEXT else text[:LINE_TEXT - 3] + "..."))
        elif facts.get("interrupted"):
            parts.append(f" - {facts['hint']}")
        out.append(line(*parts))
    not_run = [t for t in tests if t.get("status") == "NOT-RUN"]
    if not_run and only is None:
        out.append(line(("NOT-RUN ", _status_style("NOT-RUN")), plural(len(not_run), "test"), ": ",
                        str(not_run[0].get("reason") or "")))
    return out


def _status_style(status: str) -> str:
    colour = STATUS_COLOURS.get(status)
    return f"bold {colour}" if colour else "bold"
