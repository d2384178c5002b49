"""Live progress on the console, and the end-of-run summary table.

On a terminal, one rich ``Live`` (never more than one per console: rich refuses nested lives)
shows a table per running stage with a row per node. When stdout is not a terminal (CI, ``tee``)
rich would only write the last frame, so plain lines are printed instead, a node's progress at
most every few seconds unless its state changes. Events may arrive from worker threads; one lock
serialises them. The console is a view; the run directory is the record. Every string here may
come from a node (a reason, a note, a host name), so it reaches the console only as ``cell`` /
``line`` text (``cvs_tasks.terminal``: no markup, control characters shown), on a ``make_console``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from cvs_tasks.report.formatting import DASH, STATUS_COLOURS, fmt_duration, fmt_number, fmt_test_duration
from cvs_tasks.run.events import Message, NodeProgress, StageEvent
from cvs_tasks.run.records import test_name
from cvs_tasks.terminal import cell, line, make_console

PLAIN_INTERVAL_S = 5.0
STATE_STYLES = {"starting": "dim", "running": "cyan", "done": "green", "failed": "bold red", "stalled": "yellow"}

StageKey = tuple[str, str | None]
NodeKey = tuple[str, str | None, str, int]


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
        self._running: dict[StageKey, dict[tuple[str, int], NodeProgress]] = {}
        self._last_printed: dict[NodeKey, tuple[float, str]] = {}
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
            self._running[key] = {}
            self.console.print(line((test_name(*key), "bold"), ": started"), soft_wrap=True)
        else:
            self._running.pop(key, None)
            for node_key in [k for k in self._last_printed if k[:2] == key]:
                del self._last_printed[node_key]
            self.console.print(stage_end_line(event), soft_wrap=True)
        self._refresh()

    def _on_message(self, event: Message) -> None:
        """A line from a stage (a dry-run command, a warning): printed above any live display."""
        style = {"warning": "yellow", "error": "bold red"}.get(event.level, "")
        self.console.print(cell(event.text, style), soft_wrap=True, highlight=False, markup=False)

    def _on_progress(self, event: NodeProgress) -> None:
        nodes = self._running.setdefault((event.stage, event.combo), {})
        nodes[(event.host, event.rank)] = event
        if self._display is not None:
            self._refresh()
            return
        node_key = (event.stage, event.combo, event.host, event.rank)
        now = self._clock()
        last = self._last_printed.get(node_key)
        if last is None or last[1] != event.state or now - last[0] >= self.interval_s:
            self._last_printed[node_key] = (now, event.state)
            self.console.print(cell(progress_line(event)), markup=False, highlight=False, soft_wrap=True)

    # -- live view ------------------------------------------------------------------------------
    def _refresh(self) -> None:
        if self._display is not None:
            self._display.update(self._renderable(), refresh=True)

    def _renderable(self) -> Group:
        return Group(*(stage_table(key, nodes) for key, nodes in self._running.items()))


def stage_table(key: StageKey, nodes: Mapping[tuple[str, int], NodeProgress]) -> Table:
    """The live table of one running stage: a row per node."""
    table = Table(title=cell(test_name(*key)), title_justify="left", expand=False, header_style="bold")
    for column, justify in (
        ("Host", "left"),
        ("Rank", "right"),
        ("State", "left"),
        ("Step", "right"),
        ("Loss", "right"),
        ("TFLOP/s", "right"),
        ("Elapsed", "right"),
        ("Note", "left"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for progress in sorted(nodes.values(), key=lambda p: (p.rank, p.host)):
        table.add_row(
            cell(progress.host),
            cell(progress.rank),
            cell(progress.state, STATE_STYLES.get(progress.state, "")),
            cell(step_text(progress)),
            cell(fmt_number(progress.loss)),
            cell(fmt_number(progress.tflops)),
            cell(fmt_duration(progress.elapsed_s)),
            cell(progress.note),
        )
    return table


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
    """End-of-run table (a row per test), the verdict line and, given the run directory, the report."""
    console = console or make_console()
    table = Table(title=cell(f"cvs-tasks run {results.get('run_id') or DASH}"), title_justify="left",
                  header_style="bold")
    table.add_column("Test", overflow="fold")
    table.add_column("Status", no_wrap=True)
    table.add_column("Duration", justify="right")
    table.add_column("Reason", overflow="fold")
    for test in results.get("tests", []):
        status = str(test.get("status", ""))
        table.add_row(
            cell(test.get("name", "")),
            cell(status, _status_style(status)),
            cell(fmt_test_duration(status, test.get("duration_s"))),
            cell(test.get("reason") or ""),
        )
    console.print(table)
    verdict = str(results.get("verdict", "FAIL"))
    console.print(
        line("Verdict: ", (verdict, _status_style(verdict)), f" - {results.get('verdict_reason', '')}"),
        soft_wrap=True,
    )
    if run_dir is not None:
        report = Path(run_dir) / "report.html"
        where = f"Report: {report}" if report.is_file() else f"Run directory: {run_dir}"
        console.print(cell(where), soft_wrap=True)


def _status_style(status: str) -> str:
    colour = STATUS_COLOURS.get(status)
    return f"bold {colour}" if colour else "bold"
