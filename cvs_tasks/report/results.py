"""The results.json object: every expected test row of a run, its status, metrics and logs.

Built only from what the run directory holds (manifest, stage records, the ledger of what its
commands asked for, log files on disk), so a crashed or half-finished run still yields an honest
result: a row without a record is NOT-RUN with the reason, and the ledger (``run.asked``) decides
what it means for the verdict:
* asked and never recorded (interrupted, or the command was killed), or stopped on purpose
  (``--exitfirst``): listed in ``not_run``; the verdict is FAIL with ``incomplete: true``;
* asked by no command of the run (an ad hoc run of a few stages or combos): listed in
  ``not_asked``, ``asked: false`` on the row; it does not make the verdict FAIL.
A run in which nothing was asked or recorded is FAIL: a verdict needs at least one test.
Every other surface (HTML, JUnit, console summary) is derived from this object.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

from cvs_tasks.errors import BadInput
from cvs_tasks.report.first_failure import first_failure
from cvs_tasks.run.asked import Ledger, read_ledger
from cvs_tasks.run.records import StageRecord, test_name
from cvs_tasks.run.rundir import RunDir, load_record_file
from cvs_tasks.run.sandbox import inside, relative_problem
from cvs_tasks.run.stages import DIAGNOSE, node_log_ids, per_combo_ids, stage_ids

NOT_RUN = "NOT-RUN"
TEST_STATUSES: tuple[str, ...] = ("PASS", "FAIL", "ERROR", "SKIPPED", NOT_RUN)
METRIC_STATUSES: tuple[str, ...] = ("PASS", "FAIL", "RECORD", "SKIPPED")
FAILING = frozenset({"FAIL", "ERROR"})

# Manifest fields copied into results.json as they are (None when the manifest lacks them).
SUMMARY_FIELDS: tuple[str, ...] = (
    "tool_version",
    "suite",
    "backend",
    "image",
    "gpu_name",
    "gpus_per_node",
    "hosts",
    "model_name",
    "cluster_file",
    "config_file",
    "threshold_file",
    "files_hash",
    "enforce_thresholds",
    "created",
    "finished",
)

# Stage data too bulky for results.json; the HTML reads it from the record for its plots.
BULKY_DATA_KEYS = frozenset({"steps"})

Key = tuple[str, str | None]


def build_results(run: RunDir) -> dict[str, Any]:
    """The results.json object for one run directory (see module docstring)."""
    manifest = read_manifest(run)
    records = {(r.stage, r.combo): r for r in read_records(run)}
    combos = combo_order(manifest, records.values())
    hosts = manifest.get("hosts") if isinstance(manifest.get("hosts"), list) else []
    keys = expected_keys(combos, records.keys())
    if manifest.get("scope") == DIAGNOSE:  # `invoke diagnose` on its own: only what it ran is expected
        keys = [k for k in keys if k in records]
    ledger = read_ledger(run)

    tests = []
    for stage, combo in keys:
        record = records.get((stage, combo))
        logs = collect_logs(run, record, stage, combo, len(hosts))
        if record is not None:
            tests.append(test_row(record, stage, combo, logs))
        else:
            asked, why = why_not_run(ledger, manifest, run.run_id, stage, combo)
            tests.append(test_row(None, stage, combo, logs, why, asked=asked))

    missing = [t["name"] for t in tests if not t["recorded"] and t["asked"]]
    not_asked = [t["name"] for t in tests if not t["asked"]]
    interrupted = bool(manifest.get("interrupted", False))
    incomplete = interrupted or bool(missing)
    counts = count_statuses((t["status"] for t in tests), TEST_STATUSES)
    metric_counts = count_statuses((m["status"] for t in tests for m in t["metrics"]), METRIC_STATUSES)
    failed = counts["FAIL"] + counts["ERROR"]
    nothing = bool(tests) and len(not_asked) == len(tests)  # a verdict needs at least one test
    verdict = "PASS" if failed == 0 and not incomplete and not nothing else "FAIL"

    summary = {field: manifest.get(field) for field in SUMMARY_FIELDS}
    return {
        "verdict": verdict,
        "verdict_reason": verdict_reason(counts, missing, interrupted, not_asked),
        "run_id": manifest.get("run_id") or run.run_id,
        **summary,
        "duration_s": run_duration(manifest, records.values()),
        "interrupted": interrupted,
        "incomplete": incomplete,
        "not_run": missing,
        "not_asked": not_asked,
        "combos": combos,
        "counts": counts,
        "metric_counts": metric_counts,
        "tests": tests,
        "first_failure": first_failure(tests, run.path, run_id=manifest.get("run_id") or run.run_id,
                                       interrupted=interrupted),
    }


def read_manifest(run: RunDir) -> dict[str, Any]:
    """The manifest, or {} when it is missing or not a JSON object (fields then render as dashes)."""
    manifest = run.manifest()
    return manifest if isinstance(manifest, dict) else {}


def read_records(run: RunDir) -> list[StageRecord]:
    """Every readable stage record (unordered; a corrupt or half-written one counts as not run).

    Read directly rather than through ``RunDir.records()`` so a manifest with a malformed
    ``combos`` field cannot stop a report from rendering.
    """
    out = []
    check_in_run(run.path, "stages", "")
    for path in sorted(run.stages_dir.glob("*.json")) if run.stages_dir.is_dir() else []:
        check_in_run(run.path, str(path.relative_to(run.path)), "")
        record = load_record_file(path, run.path)
        if record is not None:
            out.append(record)
    return out


def combo_order(manifest: dict[str, Any], records: Iterable[StageRecord]) -> list[str]:
    """The manifest's combos in order, then any combo only the records know about."""
    declared = manifest.get("combos")
    combos = [str(c) for c in declared] if isinstance(declared, list) else []
    for record in records:
        if record.combo and record.combo not in combos:
            combos.append(record.combo)
    return combos


def expected_keys(combos: list[str], recorded: Iterable[Key]) -> list[Key]:
    """Every (stage, combo) row a complete run has, plus any extra recorded row, in lifecycle order."""
    keys: list[Key] = []
    ids, per_combo = stage_ids(), per_combo_ids()
    for stage in ids:
        if stage in per_combo:
            keys.extend((stage, combo) for combo in combos)
        else:
            keys.append((stage, None))
    keys.extend(k for k in recorded if k not in keys)
    stage_rank = {s: i for i, s in enumerate(ids)}
    combo_rank = {c: i for i, c in enumerate(combos)}

    def order(key: Key) -> tuple[int, int]:
        stage, combo = key
        return (stage_rank.get(stage, len(ids)), combo_rank.get(combo, -1) if combo else -1)

    return sorted(keys, key=order)


def why_not_run(ledger: Ledger | None, manifest: dict[str, Any], run_id: str, stage: str,
                combo: str | None) -> tuple[bool, str]:
    """(asked, reason) of a row without a record; no ledger counts every row as asked."""
    last = ledger.last_about(stage, combo) if ledger is not None else None
    if ledger is not None and last is None:
        return False, not_run_reason(manifest, run_id, asked=False)
    return True, not_run_reason(manifest, run_id, stopped=last.stopped if last is not None else "")


def not_run_reason(manifest: dict[str, Any], run_id: str, *, asked: bool = True, stopped: str = "") -> str:
    """Why an expected test has no record, and the command that runs it."""
    run_id = manifest.get("run_id") or run_id
    finish = f"`invoke all --run {run_id}` runs what is missing"
    if not asked:
        return f"not asked: no command of this run asked for it; {finish}"
    if stopped:
        return f"not run: {stopped}; `invoke all --run {run_id} --failed` runs it"
    if manifest.get("interrupted"):
        return f"not run: the run was interrupted before it; {finish}"
    if manifest.get("finished"):
        return f"not run: the run ended before it; {finish}"
    return f"not run: the run stopped before it (still going, or the harness was killed); {finish}"


def test_row(record: StageRecord | None, stage: str, combo: str | None, logs: list[dict],
             not_run: str = "not run", *, asked: bool = True) -> dict[str, Any]:
    """One results.json test: the record's outcome, or a NOT-RUN row saying why it has none
    (``asked``: False when no command of the run asked for it)."""
    if record is None:
        return {
            "name": test_name(stage, combo),
            "stage": stage,
            "combo": combo,
            "status": NOT_RUN,
            "reason": not_run,
            "recorded": False,
            "asked": asked,
            "started": None,
            "ended": None,
            "duration_s": None,
            "metrics": [],
            "nodes": [],
            "logs": logs,
            "details": {},
            "attempts": [],
        }
    status, reason = record.status, record.reason
    if status not in TEST_STATUSES:
        status, reason = "ERROR", f"record has unknown status {record.status!r}; {reason}".rstrip("; ")
    return {
        "name": record.name,
        "stage": stage,
        "combo": combo,
        "status": status,
        "reason": reason,
        "recorded": True,
        "asked": True,
        "started": record.started or None,
        "ended": record.ended or None,
        "duration_s": round(record.duration, 3) if record.started and record.ended else None,
        "metrics": [metric_row(m) for m in record.metrics],
        "nodes": [node_row(n) for n in record.nodes],
        "logs": logs,
        "details": {k: v for k, v in record.data.items() if k not in BULKY_DATA_KEYS},
        "attempts": list(record.attempts),
    }


def metric_row(row: Any) -> dict[str, Any]:
    status = row.status if row.status in METRIC_STATUSES else "RECORD"
    return {
        "name": row.name,
        "value": row.value,
        "unit": row.unit or "",
        "expected": row.expected or "-",
        "status": status,
        "reason": row.reason or "",
    }


def node_row(node: Any) -> dict[str, Any]:
    return {
        "host": node.host,
        "rank": node.rank,
        "status": node.status,
        "reason": node.reason or "",
        "last_step": node.last_step,
        "planned": node.planned,
        "log": node.log,
    }


def collect_logs(
    run: RunDir, record: StageRecord | None, stage: str, combo: str | None, nhosts: int
) -> list[dict[str, Any]]:
    """Artifact and node-log paths of a row, each marked with whether the file is in the run dir.

    The record's artifacts come first; node logs and the conventional stage/node log locations
    are added when not already listed, so a run that died before writing a record still links
    the logs that were pulled back. A path that is not a plain one inside the run directory, or a
    log that is a symlink leading out of it, is a BadInput naming the record and the field: a
    report never reads or links a file outside its run.
    """
    source = run.record_path(stage, combo).relative_to(run.path)
    listed: list[tuple[str, str, str]] = []  # label, path, the record field naming it
    if record is not None:
        listed.extend((str(label), path, f"artifacts.{label}") for label, path in record.artifacts.items())
        listed.extend((f"node {n.rank} log ({n.host})", n.log, f"nodes[{i}].log")
                       for i, n in enumerate(record.nodes) if n.log is not None)
    conventional = [("stage log", _relative(run, run.stage_log_path(stage, combo)), "")]
    if stage in node_log_ids():
        conventional.extend(
            (f"node {rank} log", _relative(run, run.node_log_path(stage, combo, rank)), "") for rank in range(nhosts)
        )

    seen: set[str] = set()
    logs: list[dict[str, Any]] = []
    for label, path, field in listed + conventional:
        if isinstance(path, str) and path in seen:  # checked once: the same path gives the same answer
            continue
        check_in_run(run.path, path, f"{source}: {field}" if field else "")
        seen.add(path)
        exists = file_in_run(run.path, path)
        if exists or field:
            logs.append({"label": label, "path": path, "exists": exists})
    return logs


def check_in_run(run_path: Path, relative: Any, named_by: str) -> None:
    """BadInput unless ``relative`` is a plain path in the run directory that does not lead out of it."""
    problem = relative_problem(relative)
    if problem is not None:
        raise BadInput(f"run directory {run_path}: {named_by or 'a log path'}: {_shown(relative)} is {problem}; "
                       "restore the record (or remove it and rerun that stage)")
    if os.path.lexists(run_path / relative) and inside(run_path, relative) is None:
        raise BadInput(f"run directory {run_path}: {relative} leads outside the run directory (a symlink)"
                       + (f", named by {named_by}" if named_by else "") + "; remove it, the report reads no "
                       "file outside its run")


def file_in_run(run_path: Path, relative: str) -> bool:
    """True when ``relative`` names an existing file inside the run directory (no escaping it)."""
    target = inside(run_path, relative)
    return target is not None and target.is_file()


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def _relative(run: RunDir, path: Path) -> str:
    return str(Path(path).relative_to(run.path))


def count_statuses(statuses: Iterable[str], known: tuple[str, ...]) -> dict[str, int]:
    counts = {s: 0 for s in known}
    total = 0
    for status in statuses:
        total += 1
        if status in counts:
            counts[status] += 1
    counts["total"] = total
    return counts


def verdict_reason(counts: dict[str, int], missing: list[str], interrupted: bool,
                   not_asked: list[str] | None = None) -> str:
    """One line saying why the verdict is what it is."""
    not_asked = not_asked or []
    if counts["total"] and len(not_asked) == counts["total"]:
        return "nothing was run: no command of this run asked for any test"
    parts = []
    if counts["FAIL"]:
        parts.append(f"{counts['FAIL']} failed")
    if counts["ERROR"]:
        parts.append(f"{counts['ERROR']} errored")
    if interrupted:
        parts.append("run interrupted")
    if missing:
        parts.append(f"run incomplete: {len(missing)} of {counts['total']} tests not run")
    if not parts:
        asked = counts["total"] - len(not_asked)
        if not not_asked:
            return f"all {asked} tests passed or were skipped by rule"
        return f"all {asked} tests asked for passed or were skipped by rule; {len(not_asked)} not asked"
    if not_asked:
        parts.append(f"{len(not_asked)} not asked")
    return "; ".join(parts)


def run_duration(manifest: dict[str, Any], records: Iterable[StageRecord]) -> float | None:
    """Wall time of the run: manifest start to finish, or to the last record's end if unfinished."""
    created = manifest.get("created")
    if not isinstance(created, (int, float)) or created <= 0:
        return None
    finished = manifest.get("finished")
    if not isinstance(finished, (int, float)) or finished <= 0:
        ends = [r.ended for r in records if r.ended]
        finished = max(ends) if ends else None
    if finished is None or finished < created:
        return None
    return round(float(finished) - float(created), 3)
