"""The last runs' values of each gated metric of a run, for the report's trend sparklines."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from cvs_tasks.history.db import present, reading
from cvs_tasks.history.entry import cluster_key, config_hash
from cvs_tasks.history.queries import metric_series
from cvs_tasks.run.stages import METRIC

TREND_RUNS = 20
GATED = frozenset({"PASS", "FAIL"})

Trends = dict[str, dict[str, list[tuple[str, float, str]]]]  # combo -> metric -> (run id, value, verdict)


def run_trends(db_path: Path, manifest: Mapping[str, Any], results: Mapping[str, Any], *,
               runs: int = TREND_RUNS) -> Trends:
    """Per combo and gated metric of ``results``: the last ``runs`` values of this config on this
    cluster up to this run, oldest first. {} when there is no history yet; HistoryUnavailable when
    one is there but cannot be read (the caller warns: a trend is decoration, never a failed report)."""
    if not present(Path(db_path)):
        return {}
    cfg, cluster = config_hash(manifest.get("effective_config")), cluster_key(manifest.get("hosts") or [])
    until = float(manifest.get("created") or 0.0) + 1e-3
    out: Trends = {}
    with reading(Path(db_path)) as conn:
        for test in results.get("tests", []):
            if test.get("stage") != METRIC.id or not test.get("combo"):
                continue
            for metric in test.get("metrics", []):
                if metric.get("status") not in GATED:
                    continue
                series = metric_series(conn, cfg, cluster, test["combo"], metric["name"], limit=runs, before=until)
                if series:
                    out.setdefault(test["combo"], {})[metric["name"]] = [(r, v, verdict) for r, _, v, verdict in series]
    return out
