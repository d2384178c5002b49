"""Faults of the surroundings: the node log directory not writable, the run directory's disk full
mid-run, and a config edited between two ad hoc commands of one run."""

from __future__ import annotations

import json
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.reliability.helpers import (
    STOP_CHECK_S,
    RunningInvoke,
    assert_nothing_left,
    assert_run_dir_readable,
    detection_bound,
    invoke,
    kept_first_combo,
    no_traceback,
    note_detection,
    read_json,
    scenario_for,
)
from tests.reliability.test_rel_interrupts import long_second_combo, mid_second_combo

pytestmark = [pytest.mark.testbed]


@contextmanager
def tmpfs(path: Path, options: str):
    """A tmpfs mounted on ``path`` for the test, always unmounted (lazily if still busy)."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True, timeout=30)
    try:
        yield path
    finally:
        done = subprocess.run(["umount", str(path)], capture_output=True, timeout=30)
        if done.returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


def test_log_dir_not_writable(testbed_cluster, reports, tmp_path, node_roots):
    sc = scenario_for(tmp_path, testbed_cluster.single_cluster_file, node_roots)
    with tmpfs(sc.log_dir, "ro,size=1m"):  # read-only: even root cannot create the combo folders
        res = invoke("all", *sc.flags(), reports=reports)
    assert res.code == 3, res.out + res.err
    no_traceback(res)
    for combo in sc.combos:
        rec = res.record("training", combo)
        assert rec["status"] == "ERROR"
        assert testbed_cluster.nodes[0].address in rec["reason"] and str(sc.log_dir) in rec["reason"], rec["reason"]
        assert "read-only file system" in rec["reason"].lower(), rec["reason"]
    assert res.record("teardown")["status"] == "PASS"
    assert_run_dir_readable(res.run_dir)
    assert_nothing_left(testbed_cluster, sc, res.run_dir.name)
    first = res.record("training", sc.combos[0])
    note_detection("log_dir_not_writable", first["ended"] - first["started"], 10, "training stage start")


def test_disk_full_on_the_run_directory(testbed_cluster, tmp_path, node_roots):
    """The run directory's disk fills up during the second combo: a clear error, the job stopped,
    the container removed, what was recorded before kept; the report renders once space is back."""
    sc = scenario_for(tmp_path, testbed_cluster.single_cluster_file, node_roots, edit=long_second_combo)
    with tmpfs(tmp_path / "small", "size=4m") as small:
        reports = small / "reports"
        reports.mkdir()
        filler = small / "filler"
        with RunningInvoke("all", *sc.flags(), reports=reports) as run:
            mid_second_combo(sc).wait_seen(120)
            subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True, timeout=60)
            filled_at = time.time()
            res = run.wait(120)
            exited_at = time.time()
        no_traceback(res)
        assert res.code == 3, res.out + res.err
        assert "no space left on device" in res.err.lower() and str(reports) in res.err, res.out + res.err
        run_dir = res.run_dir
        kept_first_combo(res, sc.combos[0], gated=False)
        assert_run_dir_readable(run_dir, rendered=False)  # every file written is whole (atomic writes)
        assert_nothing_left(testbed_cluster, sc, run_dir.name)
        filler.unlink()
        again = invoke("report", "--run", str(run_dir), reports=reports)
        no_traceback(again)
        assert (run_dir / "report.html").is_file() and (run_dir / "results.json").is_file(), again.out + again.err
        # the next poll's copy fails, then the stop, freeing the GPUs, the health snapshot and the teardown
        note_detection("run_dir_disk_full", exited_at - filled_at,
                       detection_bound(sc.poll_interval_s + STOP_CHECK_S, 8),
                       "disk filled, to harness exit after teardown")


def test_config_edited_between_two_commands_is_refused(testbed_cluster, reports, tmp_path, node_roots):
    sc = scenario_for(tmp_path, testbed_cluster.single_cluster_file, node_roots)
    first = invoke("container", *sc.flags(), reports=reports)
    assert first.code == 0, first.out + first.err
    run_dir = first.run_dir
    cfg = json.loads(sc.config.read_text())
    cfg["watch"]["stall_timeout_s"] = 99
    sc.config.write_text(json.dumps(cfg))
    second = invoke("train", "--combo", sc.combos[0], *sc.flags(), reports=reports)
    assert second.code == 2, second.out + second.err
    no_traceback(second)
    assert "changed since run" in second.err and str(sc.config) in second.err and run_dir.name in second.err
    assert not (run_dir / "stages" / "training[MBS_2_GBS_16_PRECISION_BF16].json").exists()
    assert read_json(run_dir / "stages" / "launch_container.json")["status"] == "PASS"  # kept
    down = invoke("teardown", "--run", str(run_dir), reports=reports)
    if down.code == 2:  # teardown is refused under the changed config too; the clean-up command is not
        assert "changed since run" in down.err
        down = invoke("cleanup", "--cluster", str(sc.cluster), "--config", str(sc.config), "--run", run_dir.name,
                      reports=reports)
    assert down.code == 0, down.out + down.err
    assert_nothing_left(testbed_cluster, sc, run_dir.name)
