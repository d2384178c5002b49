"""Thresholds from evidence: robust bounds from passing runs; placeholder thresholds refused while enforcing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cvs_tasks.config.thresholds import ThresholdSpec, load_threshold_file
from cvs_tasks.errors import BadInput
from cvs_tasks.history import entry_from_run, record_run
from cvs_tasks.history.calibrate import calibrated_file, placeholder_problems, robust_bound
from cvs_tasks.history.commands import calibrate_thresholds
from cvs_tasks.lifecycle.session import RunRequest, open_session
from tests.unit.history.runs import COMBO, make_run

ROOT = Path(__file__).resolve().parents[3]
TPUT = "training.throughput_per_gpu"
STEP = "training.elapsed_time_per_iteration"


def test_the_bound_is_the_median_moved_by_the_larger_of_the_margin_and_three_mads():
    tight = robust_bound(TPUT, [500, 502, 498, 501, 499], 5.0)
    assert tight.median == 500 and tight.value == pytest.approx(475.0)  # 5 % beats 3 MAD here
    loose = robust_bound(STEP, [1000, 1100, 900, 1050, 950], 5.0)
    assert loose.kind == "max_ms" and loose.value == pytest.approx(1000 + 3 * 50 * 1.4826, rel=1e-6)
    outlier = robust_bound(TPUT, [500, 500, 500, 10], 5.0)
    assert outlier.median == 500 and outlier.value == pytest.approx(475.0)  # one odd run moves nothing


def test_the_file_records_the_statistic_and_the_runs_and_loads_as_a_threshold_file(tmp_path):
    runs = [{"run_id": f"r{i}", "started": i, "metrics": {COMBO: {TPUT: 500.0 + i, STEP: 1600.0}}} for i in range(3)]
    data = calibrated_file(runs, margin_pct=5.0)
    assert data["_calibration"]["runs"] == ["r0", "r1", "r2"] and "median" in data["_calibration"]["statistic"]
    assert data[COMBO][TPUT] == {"kind": "min", "value": pytest.approx(501 * 0.95)}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    cells, _, problems, _ = load_threshold_file(path)
    assert problems == [] and cells[COMBO][STEP].kind == "max_ms"


def test_a_metric_too_few_runs_report_is_left_out():
    runs = [{"run_id": f"r{i}", "started": i, "metrics": {COMBO: {TPUT: 500.0, **({STEP: 1.0} if i else {})}}}
            for i in range(3)]
    assert list(calibrated_file(runs, min_runs=3)[COMBO]) == [TPUT]


def test_calibrate_reads_the_last_passing_runs_of_the_config_on_the_cluster(tmp_path):
    reports, db = tmp_path / "reports", tmp_path / "reports" / "history.sqlite"
    for i, (tput, status) in enumerate([(500, "PASS"), (100, "FAIL"), (510, "PASS"), (490, "PASS")]):
        record_run(db, entry_from_run(make_run(reports, f"r{i}", created=float(i), tput=tput, metric_status=status)))
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"username": "u", "priv_key_file": "/k",
                                   "node_dict": {"127.0.0.2": {}, "127.0.0.3": {}}}))
    out, data = calibrate_thresholds(reports, None, config="/cfg/sim_megatron_distributed.json", cluster=str(cluster),
                                     output=str(tmp_path / "cal.json"), runs=5, margin_pct=5.0, min_runs=3)
    assert data["_calibration"]["runs"] == ["r0", "r2", "r3"]
    assert json.loads(out.read_text())[COMBO][TPUT]["value"] == pytest.approx(500 - 3 * 10 * 1.4826, abs=1e-3)
    with pytest.raises(BadInput, match="only 3 passing run"):
        calibrate_thresholds(reports, None, config="/cfg/sim_megatron_distributed.json", cluster=str(cluster),
                             output=str(tmp_path / "x.json"), runs=5, margin_pct=5.0, min_runs=4)



def test_calibrate_keeps_an_existing_output_unless_forced(tmp_path):
    reports, db = tmp_path / "reports", tmp_path / "reports" / "history.sqlite"
    for i in range(3):
        record_run(db, entry_from_run(make_run(reports, f"r{i}", created=float(i), tput=500.0 + i)))
    cluster = tmp_path / "cluster.json"
    nodes = {"127.0.0.2": {}, "127.0.0.3": {}}
    cluster.write_text(json.dumps({"username": "u", "priv_key_file": "/k", "node_dict": nodes}))
    out = tmp_path / "site_threshold.json"
    out.write_text('{"hand": "tuned"}')
    args = dict(config="/cfg/sim_megatron_distributed.json", cluster=str(cluster), output=str(out), runs=5,
                margin_pct=5.0, min_runs=3)
    with pytest.raises(BadInput, match="exists; .*pass --force to replace it"):
        calibrate_thresholds(reports, None, **args)
    assert json.loads(out.read_text()) == {"hand": "tuned"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster.json", "reports", "site_threshold.json"]
    calibrate_thresholds(reports, None, **args, force=True)
    assert COMBO in json.loads(out.read_text())
    fresh = tmp_path / "fresh.json"
    calibrate_thresholds(reports, None, **{**args, "output": str(fresh)})
    assert COMBO in json.loads(fresh.read_text())
    assert not list(tmp_path.glob(".*calibrate"))

def test_a_zero_bound_is_named_as_a_placeholder():
    cells = {COMBO: {TPUT: ThresholdSpec(kind="min", value=0), STEP: ThresholdSpec(kind="max_ms", value=0),
                     "training.mem_usage": ThresholdSpec(kind="info", value=0)}}
    problems = placeholder_problems(cells, "t.json")
    assert len(problems) == 2 and "always pass" in problems[0] and "always fail" in problems[1]


def test_a_run_with_placeholder_thresholds_is_refused_while_enforcing(tmp_path):
    thresholds = json.loads((ROOT / "thresholds/testbed/demo_host_threshold.json").read_text())
    cell = next(k for k in thresholds if not k.startswith("_"))
    thresholds[cell]["training.throughput_per_gpu"]["value"] = 0
    (tmp_path / "t_threshold.json").write_text(json.dumps(thresholds))
    config = json.loads((ROOT / "configs/testbed/demo_host.json").read_text())
    config["threshold_json"] = str(tmp_path / "t_threshold.json")
    for key in ("hf_token_file",):
        config["paths"][key] = config["paths"][key].replace("{cvs-root}", str(ROOT))
    (tmp_path / "demo_host.json").write_text(json.dumps(config))
    req = RunRequest(config=str(tmp_path / "demo_host.json"), cluster=str(ROOT / "cluster/localhost.json"),
                     reports_dir=str(tmp_path / "reports"), new=True)
    with pytest.raises(BadInput, match="placeholder thresholds") as exc:
        open_session(req)
    assert "training.throughput_per_gpu" in str(exc.value) and "thresholds.calibrate" in str(exc.value)
    assert not (tmp_path / "reports").exists() or not any((tmp_path / "reports").iterdir())
    config["enforce_thresholds"] = False
    (tmp_path / "demo_host.json").write_text(json.dumps(config))
    open_session(req).close()
