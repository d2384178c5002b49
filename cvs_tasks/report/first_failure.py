"""The "first failure" callout at the top of a failed run's report: what failed, where, what to do.

The failing test that started first is the one to read (later failures and every skipped row
follow from it). Its record names the signature, the node and the log line; the callout adds the
signature's hint and a few lines of that node's log around the line, read from the copy in the
run directory. Reading stops right after the line, so the cost is bounded by its position.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from cvs_tasks.inputs import InputRefused
from cvs_tasks.run.sandbox import open_inside
from cvs_tasks.run.stages import hint as stage_hint

FAILING = ("FAIL", "ERROR")
CONTEXT = 3  # lines shown before and after the offending line
MAX_TEXT = 300  # characters kept of a context line

INFRA_HINT = "an infrastructure problem, not a training result: fix it, then `invoke all --run <id>` redoes what failed"


def first_failure(tests: Sequence[Mapping[str, Any]], run_path: Path | None) -> dict[str, Any] | None:
    """The callout for results.json, or None when nothing failed."""
    failing = [(i, t) for i, t in enumerate(tests) if t.get("status") in FAILING]
    if not failing:
        return None
    _, test = min(failing, key=lambda it: (_number(it[1].get("started")), it[0]))
    details = test.get("details") or {}
    error = details.get("error") if isinstance(details.get("error"), dict) else {}
    node = error.get("host") or _failed_node(test)
    log = _node_log(test, node)
    line_no = error.get("line") if isinstance(error.get("line"), int) else None
    context = _context(run_path, log, line_no) if run_path and log and line_no else []
    return {
        "test": test.get("name"),
        "stage": test.get("stage"),
        "combo": test.get("combo"),
        "status": test.get("status"),
        "reason": test.get("reason") or "",
        "node": node,
        "rank": error.get("rank"),
        "signature": error.get("name"),
        "cls": error.get("cls"),
        "line_no": line_no,
        "line": (error.get("text") or "").strip(),
        "hint": error.get("hint") or _signature_hint(error.get("name"), error.get("cls")) or _default_hint(test),
        "context": context,
        "log": log,
    }


def _number(value: Any) -> float:
    return value if isinstance(value, (int, float)) and math.isfinite(value) else math.inf


def _failed_node(test: Mapping[str, Any]) -> str | None:
    for node in test.get("nodes") or []:
        if node.get("status") in FAILING:
            return node.get("host")
    return None


def _node_log(test: Mapping[str, Any], host: str | None) -> str | None:
    """The node's training log copy (relative to the run directory), else the test's first log."""
    for node in test.get("nodes") or []:
        if node.get("log") and (host is None or node.get("host") == host):
            return node["log"]
    for log in test.get("logs") or []:
        if log.get("exists") and log.get("path"):
            return log["path"]
    return None


def _signature_hint(name: Any, cls: Any) -> str:
    """The signature table's hint for a record that stored none (written by an older version):
    by the signature's name, else the first hint of its class."""
    from cvs_tasks.metrics.signatures import SIGNATURES

    by_name = next((sig.hint for sig in SIGNATURES if sig.name == name and sig.hint), "")
    return by_name or next((sig.hint for sig in SIGNATURES if cls and sig.cls == cls and sig.hint), "")


def _default_hint(test: Mapping[str, Any]) -> str:
    """What to do when the record carries no signature hint: the stage table's hint for the stage."""
    return stage_hint(test.get("stage")) or (INFRA_HINT if test.get("status") == "ERROR" else "")


def _context(run_path: Path, log: Any, line_no: int) -> list[list[Any]]:
    """[[n, text], ...] for lines line_no-CONTEXT .. line_no+CONTEXT of a log in the run directory
    ([] if unreadable, or if ``log`` names anything outside the run directory).

    Read in chunks with each line cut to its head (``metrics.parser.line_heads``, the reader behind
    ``logs.parse``): a log line of gigabytes costs one chunk of memory, not the line."""
    from cvs_tasks.metrics.parser import line_heads

    rows: list[list[Any]] = []
    try:
        fd = open_inside(run_path, log, "log")
        for n, raw in line_heads(fd, 4 * MAX_TEXT, first=max(1, line_no - CONTEXT)):
            rows.append([n, raw.decode("utf-8", "replace").rstrip("\r")[:MAX_TEXT]])
            if n >= line_no + CONTEXT:
                break
    except (InputRefused, OSError):
        return []
    return rows
