"""What a failed test says about itself, read from results.json rows: the "What failed first"
callout at the top of the report, and the failure lines at the end of the console.

The failing test that started first is the one to read (later failures and every skipped row
follow from it). Each failing test names its node, the rank the failing line itself names (a
node's log holds every local rank: ``[rank7]:`` is rank 7, whatever the node's place in the
cluster), the signature, the log line and that node's own log; a judging test (metric, loss curve)
names the metrics that failed with their units and bounds, and the node whose log was measured. An
interrupted test is called interrupted, with the command that finishes the run by its real id.
The callout adds a few lines of the node's log around the line, read from the copy in the run
directory; reading stops right after the line, so the cost is bounded by its position.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from cvs_tasks.inputs import InputRefused
from cvs_tasks.report.formatting import bound_text, fmt_number, short_metric
from cvs_tasks.run.sandbox import open_inside
from cvs_tasks.run.stages import hint as stage_hint
from cvs_tasks.run.stages import stage as stage_row

FAILING = ("FAIL", "ERROR")
CONTEXT = 3  # lines shown before and after the offending line
MAX_TEXT = 300  # characters kept of a context line
INTERRUPTED = "INTERRUPTED"

# The rank a line was printed by: torchrun ``[rank7]:`` / ``[default7]:``, Primus ``[rank-7/8]``,
# torch elastic ``local_rank: 7``, NCCL ``[Rank 7]``, srun ``7: ``.
_LINE_RANK = re.compile(r"\[(?:rank-?|default|Rank )(\d+)(?:/\d+)?\]|\blocal_rank: (\d+)|^\s*(\d+): ")


def infra_hint(run_id: Any) -> str:
    return (f"an infrastructure problem, not a training result: fix it, then `invoke all --run {run_id or '<id>'}` "
            "redoes what failed")


def interrupted_hint(run_id: Any) -> str:
    return (f"the run was interrupted (Ctrl-C or SIGTERM) and torn down: `invoke all --run {run_id or '<id>'}` "
            "runs what is missing and keeps what is recorded")


def first_failure(tests: Sequence[Mapping[str, Any]], run_path: Path | None, *, run_id: Any = None,
                  interrupted: bool = False) -> dict[str, Any] | None:
    """The callout for results.json, or None when nothing failed and the run was not interrupted.

    An interrupted run with no failed test still gets one: the first test it never reached."""
    failing = [(i, t) for i, t in enumerate(tests) if t.get("status") in FAILING]
    if not failing:
        if not interrupted:
            return None
        stopped = next((t for t in tests if t.get("status") == "NOT-RUN"), None)
        return _interrupted_callout(stopped, run_id)
    _, test = min(failing, key=lambda it: (_number(it[1].get("started")), it[0]))
    facts = failure_facts(test, tests, run_id=run_id)
    readable = run_path is not None and facts["log"] and facts["line_no"]
    return {**facts, "context": _context(run_path, facts["log"], facts["line_no"]) if readable else []}


def failed_tests(tests: Sequence[Mapping[str, Any]], *, run_id: Any = None) -> list[dict[str, Any]]:
    """Every failed test's facts, in the order of the report (the console prints a line for each)."""
    return [failure_facts(t, tests, run_id=run_id) for t in tests if t.get("status") in FAILING]


def failure_facts(test: Mapping[str, Any], tests: Sequence[Mapping[str, Any]], *,
                  run_id: Any = None) -> dict[str, Any]:
    """One failed test: where (node, its place in the cluster, the rank the line names), what
    (signature, line, failing metrics with unit and bound), the node's own log and what to do."""
    details = test.get("details") or {}
    error = details.get("error") if isinstance(details.get("error"), dict) else {}
    line = (error.get("text") or "").strip()
    line_no = error.get("line") if isinstance(error.get("line"), int) else None
    measured = _measured_node(test, tests)
    node = error.get("host") or _failed_node(test) or (measured or {}).get("host")
    was_interrupted = bool(details.get("interrupted"))
    return {
        "test": test.get("name"),
        "stage": test.get("stage"),
        "combo": test.get("combo"),
        "status": INTERRUPTED if was_interrupted else test.get("status"),
        "interrupted": was_interrupted,
        "reason": test.get("reason") or "",
        "node": node,
        "node_rank": _node_rank(error, test, measured, node),
        "rank": line_rank(line),
        "signature": error.get("name"),
        "cls": error.get("cls"),
        "line_no": line_no,
        "line": line,
        "metrics": failing_metrics(test),
        "hint": _hint(test, error, run_id, was_interrupted),
        "log": _node_log(test, measured, node),
        "stage_log": _stage_log(test),
    }


def line_rank(line: str) -> int | None:
    """The rank the failing line names (``[rank7]: ...`` -> 7); None when it names none."""
    found = _LINE_RANK.search(line or "")
    if not found:
        return None
    return int(next(g for g in found.groups() if g is not None))


def failing_metrics(test: Mapping[str, Any]) -> list[dict[str, str]]:
    """A judging test's failed gates: the metric, its value with the unit, the bound with the unit."""
    rows = []
    for m in test.get("metrics") or []:
        if m.get("status") != "FAIL":
            continue
        unit = m.get("unit") or ""
        value = fmt_number(m.get("value"))
        rows.append({"name": short_metric(str(m.get("name", ""))), "value": f"{value} {unit}".strip(),
                     "bound": bound_text(m.get("expected"), unit), "reason": m.get("reason") or ""})
    details = test.get("details") or {}
    if not rows and test.get("status") == "FAIL" and _is_num(details.get("slope")) \
            and _is_num(details.get("max_slope")):  # the loss curve: its one gate
        rows.append({"name": "loss slope", "value": f"{fmt_number(details['slope'])} per step",
                     "bound": f"<= {fmt_number(details['max_slope'])} per step", "reason": ""})
    return rows


def cause_text(facts: Mapping[str, Any]) -> str:
    """The cause in one phrase: the signature, the failing gates, or the recorded reason."""
    if facts.get("interrupted"):
        return "interrupted by the user"
    if facts.get("metrics"):
        return "; ".join(f"{m['name']} {m['value']}, bound {m['bound']}" for m in facts["metrics"])
    if facts.get("signature"):
        return str(facts["signature"]) + (f" ({facts['cls']})" if facts.get("cls") else "")
    return str(facts.get("reason") or facts.get("status") or "")


def where_text(facts: Mapping[str, Any]) -> str:
    """``node localhost, rank 7`` (the rank the line names), else ``node localhost (node 0 of the
    cluster)``; "" when no node is known."""
    node = facts.get("node")
    if not node:
        return ""
    if facts.get("rank") is not None:
        return f"node {node}, rank {facts['rank']}"
    if facts.get("node_rank") is not None:
        return f"node {node} (node {facts['node_rank']} of the cluster)"
    return f"node {node}"


def error_where(error: Mapping[str, Any]) -> str:
    """Where a recorded error happened, as ``where_text`` says it: the node, the rank its line names."""
    return where_text({"node": error.get("host"), "rank": line_rank(str(error.get("text") or "")),
                       "node_rank": error.get("rank") if isinstance(error.get("rank"), int) else None})


def _interrupted_callout(test: Mapping[str, Any] | None, run_id: Any) -> dict[str, Any]:
    return {
        "test": (test or {}).get("name"), "stage": (test or {}).get("stage"), "combo": (test or {}).get("combo"),
        "status": INTERRUPTED, "interrupted": True,
        "reason": f"run {run_id or '—'} was interrupted before this test", "node": None, "node_rank": None,
        "rank": None, "signature": None, "cls": None, "line_no": None, "line": "", "metrics": [],
        "hint": interrupted_hint(run_id), "log": None, "stage_log": None, "context": [],
    }


def _number(value: Any) -> float:
    return value if isinstance(value, (int, float)) and math.isfinite(value) else math.inf


def _is_num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _failed_node(test: Mapping[str, Any]) -> str | None:
    for node in test.get("nodes") or []:
        if node.get("status") in FAILING:
            return node.get("host")
    return None


def _measured_node(test: Mapping[str, Any], tests: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """For a judging test (``reads`` in the stage table): the node of the stage it reads whose log
    carries the iteration lines it judged (furthest step, then the last rank, as the watcher picks it)."""
    try:
        reads = stage_row(str(test.get("stage"))).reads
    except KeyError:
        return None
    if not reads:
        return None
    source = next((t for t in tests if t.get("stage") == reads and t.get("combo") == test.get("combo")), None)
    nodes = [n for n in (source or {}).get("nodes") or [] if n.get("host")]
    if not nodes:
        return None
    missing = _missing_logs(source or {})
    return max(nodes, key=lambda n: (n.get("log") not in missing,
                                     n.get("last_step") if isinstance(n.get("last_step"), int) else -1,
                                     n.get("rank") if isinstance(n.get("rank"), int) else -1))


def _missing_logs(test: Mapping[str, Any]) -> set[str]:
    """The logs a results row lists as not in the run directory (never pulled back)."""
    return {log.get("path") for log in test.get("logs") or [] if not log.get("exists")}


def _node_rank(error: Mapping[str, Any], test: Mapping[str, Any], measured: Mapping[str, Any] | None,
               node: Any) -> int | None:
    if isinstance(error.get("rank"), int) and error.get("host") == node:
        return error["rank"]
    for candidate in [*(test.get("nodes") or []), measured or {}]:
        if candidate.get("host") == node and isinstance(candidate.get("rank"), int):
            return candidate["rank"]
    return None


def _node_log(test: Mapping[str, Any], measured: Mapping[str, Any] | None, host: Any) -> str | None:
    """The node's own training log copy (relative to the run directory): never a stage log."""
    missing = _missing_logs(test)
    for node in [*(test.get("nodes") or []), measured or {}]:
        if node.get("log") and node["log"] not in missing and (host is None or node.get("host") == host):
            return node["log"]
    return None


def _stage_log(test: Mapping[str, Any]) -> str | None:
    for log in test.get("logs") or []:
        if log.get("label") == "stage log" and log.get("exists") and log.get("path"):
            return log["path"]
    return None


def _hint(test: Mapping[str, Any], error: Mapping[str, Any], run_id: Any, was_interrupted: bool) -> str:
    if was_interrupted:
        return interrupted_hint(run_id)
    return (error.get("hint") or _signature_hint(error.get("name"), error.get("cls"))
            or stage_hint(test.get("stage")) or (infra_hint(run_id) if test.get("status") == "ERROR" else ""))


def _signature_hint(name: Any, cls: Any) -> str:
    """The signature table's hint for a record that stored none (written by an older version):
    by the signature's name, else the first hint of its class."""
    from cvs_tasks.metrics.signatures import SIGNATURES

    by_name = next((sig.hint for sig in SIGNATURES if sig.name == name and sig.hint), "")
    return by_name or next((sig.hint for sig in SIGNATURES if cls and sig.cls == cls and sig.hint), "")


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
