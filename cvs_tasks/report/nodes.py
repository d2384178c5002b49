"""What the report says about the nodes: each node's fingerprint with drift marked, the bad nodes
named, and each combo's health findings per node. Drifting, failing and outlier nodes come first
in every node table, so at 1,024 nodes the ones to read are at the top.

Also ``passing_nodes.txt`` / ``failing_nodes.txt`` (one host per line) for schedulers and ops
scripts: a node fails when any stage judged it FAIL or ERROR, or ``diagnose`` named it an outlier.

The health table of a combo is read from the training record's ``health`` data (see
`cvs_tasks.health`): one row per finding of each check; a check with no finding shows as
one row with its status and summary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from cvs_tasks.remote.fingerprint import FACT_NAMES, drift
from cvs_tasks.report.formatting import DASH
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
    """(passing hosts, failing host -> why) over every node any stage judged; [] and {} when none did.

    Linear in nodes x tests (a dict keeps the order hosts were first judged): 1,024 nodes x 16
    combos is 50,000 node rows."""
    judged: dict[str, None] = {}
    failing: dict[str, str] = {}
    for test in results.get("tests", []):
        for node in test.get("nodes", []):
            if node.get("status") not in ("PASS", "FAIL", "ERROR"):
                continue
            host = str(node.get("host"))
            judged.setdefault(host, None)
            if node.get("status") in BAD and host not in failing:
                failing[host] = f"{test.get('name')}: {node.get('reason') or node.get('status')}"
    for outlier in _details(results, DIAGNOSE).get("outliers", []):
        host = str(outlier.get("host"))
        judged.setdefault(host, None)
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
    # drifting and failing nodes first, then the others in cluster order
    odd = {h for h, _ in drifting} | set(failing)
    rows = [{"host": h, "cells": [{"value": str(v.get(c, "—")), "drift": drifting.get((h, c), "")} for c in columns]}
            for h, v in sorted(facts.items(), key=lambda hv: hv[0] not in odd)]
    outliers = {o.get("host") for o in diag.get("outliers", [])}
    return {
        "columns": columns,
        "rows": rows,
        "drift": [f"{h}: {text}" for (h, _), text in drifting.items()],
        "failing": [{"host": h, "why": why} for h, why in failing.items()],
        "passing": passing,
        "diagnose": sorted(({**n, "outlier": n.get("host") in outliers} for n in diag.get("per_node", [])),
                           key=lambda n: not n["outlier"]),  # outliers first
        "diagnose_reason": diag.get("summary", ""),
    }


# -- the health table of a combo -------------------------------------------------------------------
CHECK_LABELS = {"rdma_error_counters": "RDMA error counters", "kernel_log": "Kernel log (amdgpu)"}


def health_rows(details: Mapping[str, Any]) -> list[dict[str, str]]:
    health = details.get("health")
    checks = health.get("checks") if isinstance(health, Mapping) else None
    rows: list[dict[str, str]] = []
    for check in checks if isinstance(checks, list) else []:
        if not isinstance(check, Mapping):
            continue
        label = CHECK_LABELS.get(str(check.get("name")), str(check.get("name")))
        findings = [r for r in check.get("rows") or [] if isinstance(r, Mapping)]
        if not findings:
            rows.append(_row(label, check.get("status"), text=check.get("summary")))
        for r in findings:
            if "counter" in r:
                rows.append(_row(label, r.get("status"), node=r.get("node"), device=r.get("device"),
                                 port=r.get("port"), counter=r.get("counter"), delta=f"+{r.get('delta')}",
                                 text=f"{r.get('before')} -> {r.get('after')}"))
            else:
                rows.append(_row(label, r.get("status"), node=r.get("node"), text=r.get("line"),
                                 counter=r.get("what")))
        hidden = int(check.get("count") or 0) - len(findings)
        if findings and hidden > 0:
            rows.append(_row(label, check.get("status"), text=f"and {hidden} more line(s); see the record"))
    return rows


def _row(check: str, status: Any, *, node: Any = None, device: Any = None, port: Any = None,
         counter: Any = None, delta: Any = None, text: Any = None) -> dict[str, str]:
    def show(value: Any) -> str:
        return DASH if value in (None, "") else str(value)

    return {"check": check, "status": show(status), "node": show(node), "device": show(device),
            "port": show(port), "counter": show(counter), "delta": show(delta), "text": show(text)}
