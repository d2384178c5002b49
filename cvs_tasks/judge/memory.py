"""Primus memory use: recorded, not gated by the shipped thresholds.

The product document (docs/product.md#metrics-and-passfail) says Primus prints no ``mem usages:`` line
and that the optional ``training.mem_usage`` spec therefore skips. We read Primus' hip ``usage_ratio`` instead, so a
value exists; gating it with the shipped (optional) spec, calibrated on ROCm Megatron-LM's
figure, would fail runs the document says pass. So on Primus an optional ``mem_usage`` spec is
shown as a RECORD row with its bound; a cell that writes ``"optional": false`` gates it as usual.
"""

from __future__ import annotations

from typing import Any, Mapping

from cvs_tasks import backends
from cvs_tasks.run.records import MetricRow

METRIC = "training.mem_usage"
REASON = ("recorded, not gated: Primus memory use (hip usage_ratio) is not what the shipped optional spec "
          "was set for; write \"optional\": false in the cell to gate it")


def ungated_specs(cell: Mapping[str, Any] | None, backend: str) -> tuple[Mapping[str, Any] | None, set[str]]:
    """(the cell with the specs this backend records only turned into ``info``, their names);
    ``backend`` records an optional memory spec only when it says so (``memory_record_only``)."""
    spec = cell.get(METRIC) if cell else None
    if not backends.get(backend).memory_record_only or spec is None or not getattr(spec, "optional", False):
        return cell, set()
    if getattr(spec, "kind", None) in ("info", "baseline"):
        return cell, set()
    return {**cell, METRIC: spec.model_copy(update={"kind": "info"})}, {METRIC}


def explain(rows: list[MetricRow], names: set[str]) -> list[MetricRow]:
    """Give the rows of ``names`` the reason they were recorded only."""
    for row in rows:
        if row.name in names and row.status == "RECORD":
            row.status, row.reason = ("RECORD", REASON) if row.value is not None else (
                "SKIPPED", "no value produced this run")
    return rows
