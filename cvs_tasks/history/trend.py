"""The last runs' values of each gated metric of a run, for the report's trend sparklines."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from cvs_tasks.history.db import HistoryUnavailable, history_path, present, reading
from cvs_tasks.history.entry import cluster_key, config_hash
from cvs_tasks.history.queries import metric_series
from cvs_tasks.run.rundir import RunDir
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


def report_trends(history: Path | None = None,
                  warn: Callable[[str], None] = lambda text: None) -> Callable[[RunDir, Mapping, Mapping], Trends]:
    """The trend source ``report.render_all`` takes: each gated metric's last runs from ``history``
    (the caller's config or flag; default ``$CVS_HISTORY_DB`` or ``<reports>/history.sqlite``), never
    a path the run directory names (a run directory is data, not a place to write to). {} without a
    history, and {} with a warning to ``warn`` when it cannot be read: a report never needs it."""
    def trends(run: RunDir, manifest: Mapping[str, Any], results: Mapping[str, Any]) -> Trends:
        try:
            return run_trends(history or history_path(run.path.parent), manifest, results)
        except HistoryUnavailable as exc:
            warn(f"warning: history unreadable: {exc}; the report has no trend lines")
        except Exception as exc:  # a trend is decoration: a history bug must not stop a report
            warn(f"warning: trend lines left out ({type(exc).__name__}: {exc})")
        return {}
    return trends
