"""The report's node view: each node's fingerprint with drift marked, and the bad nodes named.

Also ``passing_nodes.txt`` / ``failing_nodes.txt`` (one host per line) for schedulers and ops
scripts: a node fails when any stage judged it FAIL or ERROR, or ``diagnose`` named it an outlier.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from cvs_tasks.remote.fingerprint import FACT_NAMES, drift
from cvs_tasks.run.stages import DIAGNOSE, LAUNCH_CONTAINER

PASSING_FILE = "passing_nodes.txt"
FAILING_FILE = "failing_nodes.txt"
BAD = frozenset({"FAIL", "ERROR"})


def _details(results: Mapping[str, Any], stage: str) -> Mapping[str, Any]:
    for test in results.get("tests", []):
        if test.get("stage") == stage and test.get("recorded"):
            return test.get("details") or {}
    return {}


def node_verdicts(results: Mapping[str, Any]) -> tuple[list[str], dict[str, str]]:
    """(passing hosts, failing host -> why) over every node any stage judged; [] and {} when none did."""
    judged: list[str] = []
    failing: dict[str, str] = {}
    for test in results.get("tests", []):
        for node in test.get("nodes", []):
            host = str(node.get("host"))
            if node.get("status") not in ("PASS", "FAIL", "ERROR"):
                continue
            if host not in judged:
                judged.append(host)
            if node.get("status") in BAD and host not in failing:
                failing[host] = f"{test.get('name')}: {node.get('reason') or node.get('status')}"
    for outlier in _details(results, DIAGNOSE).get("outliers", []):
        host = str(outlier.get("host"))
        if host not in judged:
            judged.append(host)
        failing.setdefault(host, f"diagnose: {outlier.get('reason')}")
    return [h for h in judged if h not in failing], failing


def write_node_lists(run_path: Path, results: Mapping[str, Any]) -> list[Path]:
    """Write both lists when any node was judged; returns the files written."""
    passing, failing = node_verdicts(results)
    if not passing and not failing:
        return []
    from cvs_tasks.run.rundir import write_bytes_atomic

    written = []
    for name, hosts in ((PASSING_FILE, passing), (FAILING_FILE, list(failing))):
        path = Path(run_path) / name
        write_bytes_atomic(path, "".join(f"{h}\n" for h in hosts).encode("utf-8"))
        written.append(path)
    return written


def nodes_view(results: Mapping[str, Any]) -> dict | None:
    """Fingerprint table (drifting cells marked), drift lines, failing nodes; None when nothing to show."""
    launch = _details(results, LAUNCH_CONTAINER.id)
    facts: dict[str, dict] = {str(h): dict(f) for h, f in (launch.get("fingerprints") or {}).items()
                              if isinstance(f, dict)}
    passing, failing = node_verdicts(results)
    diag = _details(results, DIAGNOSE)
    if not facts and not failing and not diag:
        return None
    drifting = {(d.host, d.fact): d.text for d in drift(facts)}
    columns = [f for f in FACT_NAMES if any(f in v for v in facts.values())]
    rows = [{"host": h, "cells": [{"value": str(v.get(c, "—")), "drift": drifting.get((h, c), "")} for c in columns]}
            for h, v in facts.items()]
    return {
        "columns": columns,
        "rows": rows,
        "drift": [f"{h}: {text}" for (h, _), text in drifting.items()],
        "failing": [{"host": h, "why": why} for h, why in failing.items()],
        "passing": passing,
        "diagnose": [{**n, "outlier": n.get("host") in {o.get("host") for o in diag.get("outliers", [])}}
                     for n in diag.get("per_node", [])],
        "diagnose_reason": diag.get("summary", ""),
    }
