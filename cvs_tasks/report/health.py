"""The report's health table of a combo: one row per finding of each check, or one per check.

Read from the training record's ``health`` data (see `cvs_tasks.health`); a check with
no finding shows as one row with its status and summary.
"""

from __future__ import annotations

from typing import Any, Mapping

from cvs_tasks.report.formatting import DASH

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
