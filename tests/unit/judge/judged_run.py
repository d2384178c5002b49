"""A demo run judged from a fixture log, for the tests that add a metric or a threshold kind.

The real path from a threshold file to the report: the demo config with extra specs in its
threshold file (loaded by ``open_session``, as every run loads it), each combo's training record
holding what the parser read from a fixture log, the metric stage, and the rendered report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cvs_tasks.lifecycle.gate_stages import metric
from cvs_tasks.lifecycle.session import RunRequest, open_session
from cvs_tasks.metrics.parser import parse_file
from cvs_tasks.report.render import render_all
from cvs_tasks.run import StageRecord
from cvs_tasks.run.stages import METRIC

ROOT = Path(__file__).resolve().parents[3]
LOG = ROOT / "tests" / "fixtures" / "logs" / "megatron_rocm_fork.log"
DEMO = ROOT / "configs" / "testbed" / "demo_host.json"
DEMO_THRESHOLDS = ROOT / "thresholds" / "testbed" / "demo_host_threshold.json"
BF16, FP8 = "MBS=2,GBS=16,PRECISION=BF16", "MBS=2,GBS=16,PRECISION=FP8"


def threshold_file(tmp_path: Path, cells: dict[str, dict[str, Any]]) -> Path:
    """The demo threshold file with ``cells`` (combo -> metric -> spec) added."""
    data = json.loads(DEMO_THRESHOLDS.read_text())
    for combo, specs in cells.items():
        data[combo].update(specs)
    path = tmp_path / "demo_host_threshold.json"
    path.write_text(json.dumps(data))
    return path


def judged_demo_run(tmp_path: Path, cells: dict[str, dict[str, Any]]) -> tuple[dict, dict[str, StageRecord], str]:
    """(results.json, the metric record per combo, metrics.html) of a demo run whose every combo
    trained the fixture log, judged against the demo thresholds plus ``cells``."""
    config = json.loads(DEMO.read_text())
    config["threshold_json"] = str(threshold_file(tmp_path, cells))
    config["paths"]["hf_token_file"] = config["paths"]["hf_token_file"].replace("{cvs-root}", str(ROOT))
    (tmp_path / "demo_host.json").write_text(json.dumps(config))
    session = open_session(RunRequest(config=str(tmp_path / "demo_host.json"),
                                      cluster=str(ROOT / "cluster" / "localhost.json"),
                                      reports_dir=str(tmp_path / "reports"), new=True))
    try:
        parser = parse_file(LOG)
        records = {}
        for combo in session.plan.combo_ids:
            session.run.write_record(StageRecord("training", "PASS", combo=combo,
                                                 data={"metrics": parser.metrics(), "completed": True}))
            records[combo] = metric(session, combo)
            records[combo].stage, records[combo].combo = METRIC.id, combo  # as the runner stamps a body's result
            session.run.write_record(records[combo])
        paths = render_all(session.run)
        return json.loads(paths["results"].read_text()), records, paths["metrics"].read_text()
    finally:
        session.close()


def report_row(results: dict, combo: str, name: str) -> dict:
    """The results.json row of metric ``name`` in the metric test of ``combo``."""
    test = next(t for t in results["tests"] if t["stage"] == "metric" and t["combo"] == combo)
    return next(m for m in test["metrics"] if m["name"] == name)
