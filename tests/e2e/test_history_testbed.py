"""Fleet memory on the testbed: history, the baseline gate, compare, diagnose, drift, calibrate.

Two runs, then a third with node 2 slowed: the `baseline` gate fails it, `invoke compare` shows
the delta, the automatic and the standalone `invoke diagnose` name node 2; a node with another
driver version is flagged by `cluster.check`; `thresholds.calibrate` on three passing runs writes
a file that a fourth run passes and a slowed run fails.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO, edited_config, run_invoke

pytestmark = [pytest.mark.testbed, pytest.mark.e2e]

CONFIG = REPO / "configs" / "testbed" / "sim_megatron_distributed.json"
COMBO = "MBS=2,GBS=32,PRECISION=BF16"
TPUT = "training.throughput_per_gpu"
STEP = "training.elapsed_time_per_iteration"
SLOW = "slow=1.4"


def baseline_config(dest: Path, faults: Path, threshold: dict | None = None) -> Path:
    dest.mkdir(parents=True, exist_ok=True)

    def edit(cfg):
        cfg["sweep"] = {"combinations": {COMBO: cfg["sweep"]["combinations"][COMBO]}, "runs": [COMBO]}
        cfg["container"]["env"]["SIM_NODE_FAULTS"] = str(faults)
        cfg["diagnose"] = {"auto": True, "tolerance_pct": 10}
        cfg["smoke"]["enabled"] = False  # six full runs: the gates read training; diagnose runs its own cell
        cell = threshold or {
            TPUT: {"kind": "baseline", "tolerance_pct": 10, "min_runs": 2, "runs": 5},
            STEP: {"kind": "baseline", "tolerance_pct": 10, "min_runs": 2, "runs": 5},
        }
        (dest / cfg["threshold_json"]).write_text(json.dumps({COMBO: cell} if threshold is None else threshold))

    return edited_config(CONFIG, dest, edit)


def metric_rows(result) -> dict:
    return {m["name"]: m for m in result.record("metric", COMBO)["metrics"]}


def lines(path: Path) -> list[str]:
    return path.read_text().split()


def test_history_baseline_compare_diagnose_drift_and_calibrate(testbed_cluster, tmp_path, reports):
    cluster = str(testbed_cluster.cluster_file)
    faults = testbed_cluster.state_dir / "shared" / f"node-faults-{tmp_path.name}"
    faults.mkdir(parents=True)
    versions = testbed_cluster.state_dir / "nodes" / "node1" / "versions.env"
    config = baseline_config(tmp_path / "baseline", faults)
    args = ("--config", str(config), "--cluster", cluster)
    try:
        first = run_invoke("all", *args, reports=reports)
        assert first.code == 0, first.err + first.out
        assert metric_rows(first)[TPUT]["status"] == "RECORD" and "0 of the 2" in metric_rows(first)[TPUT]["reason"]
        assert first.record("launch_container")["data"]["drift"] == []
        first_id = first.run_dir.name
        second = run_invoke("all", *args, reports=reports)
        assert second.code == 0, second.err + second.out
        second_id = second.run_dir.name

        (faults / "node1").write_text(SLOW)  # node 2 (rank 1, 127.0.0.3) runs 40 % slower
        third = run_invoke("all", *args, reports=reports)
        assert third.code == 1, third.err + third.out
        rows = metric_rows(third)
        assert rows[TPUT]["status"] == "FAIL" and "median" in rows[TPUT]["reason"], rows[TPUT]
        assert rows[STEP]["status"] == "FAIL", rows[STEP]
        slow_node = testbed_cluster.nodes[1].address
        auto = third.record("diagnose")
        assert [o["host"] for o in auto["data"]["outliers"]] == [slow_node], auto
        assert lines(third.run_dir / "failing_nodes.txt") == [slow_node]
        assert lines(third.run_dir / "passing_nodes.txt") == [testbed_cluster.nodes[0].address]
        html = (third.run_dir / "report.html").read_text()
        assert 'class="spark"' in html and "Failing nodes (1)" in html
        third_id = third.run_dir.name

        compared = run_invoke("compare", second_id, third_id, "--json", reports=reports)
        assert compared.code == 0, compared.err
        delta = next(m for m in json.loads(compared.out)["metrics"] if m["metric"] == TPUT)
        # run 2 had one past run: recorded and -35 < delta["pct"] < -20, delta
        assert delta["status_a"] == "RECORD" and delta["status_b"] == "FAIL"
        table = run_invoke("compare", second_id, third_id, reports=reports)
        assert f"{delta['pct']:+.1f}%" in table.out

        alone = run_invoke("diagnose", *args, reports=reports)
        assert alone.code == 1, alone.err + alone.out
        assert lines(alone.run_dir / "failing_nodes.txt") == [slow_node]
        assert f"bad node {slow_node}" in alone.out + alone.err

        listed = run_invoke("history", "--json", "--config", str(config), reports=reports)
        ids = [r["run_id"] for r in json.loads(listed.out)]
        assert {first_id, second_id, third_id} <= set(ids) and ids.index(third_id) < ids.index(first_id)

        versions.write_text("DRIVER=6.9.0\n")
        checked = run_invoke("cluster.check", "--cluster", cluster, "--config", str(config), reports=reports)
        assert checked.code == 3, checked.out + checked.err
        assert f"{slow_node}: versions: drift: driver 6.9.0 differs from 6.10.5" in checked.out, checked.out
        versions.unlink()

        (faults / "node1").unlink()
        fourth = run_invoke("all", *args, reports=reports)  # the third passing run: baseline within 10 %
        assert fourth.code == 0, fourth.err + fourth.out
        assert metric_rows(fourth)[TPUT]["status"] == "PASS"
        calibrated = tmp_path / "calibrated_threshold.json"
        cal = run_invoke("thresholds.calibrate", *args, "--output", str(calibrated), reports=reports)
        assert cal.code == 0, cal.err + cal.out
        data = json.loads(calibrated.read_text())
        assert data["_calibration"]["runs"] == [first_id, second_id, fourth.run_dir.name]
        assert data[COMBO][TPUT]["kind"] == "min"

        gated = baseline_config(tmp_path / "gated", faults, threshold=data)
        fifth = run_invoke("all", "--config", str(gated), "--cluster", cluster, reports=reports)
        assert fifth.code == 0, fifth.err + fifth.out
        assert metric_rows(fifth)[TPUT]["status"] == "PASS"
        (faults / "node1").write_text(SLOW)
        sixth = run_invoke("all", "--config", str(gated), "--cluster", cluster, reports=reports)
        assert sixth.code == 1 and metric_rows(sixth)[TPUT]["status"] == "FAIL", sixth.out
    finally:
        versions.unlink(missing_ok=True)
        shutil.rmtree(faults, ignore_errors=True)
