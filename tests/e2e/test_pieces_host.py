"""Runs in pieces end honestly (README, "The lifecycle, whole or by hand"), through the real invoke
CLI on this machine (host runtime, simulated trainer):

- a run made of `container`, `smoke`, `train --combo X`, `metric --combo X`, `teardown` is PASS,
  the stages and combos nobody asked for NOT-RUN "not asked";
- `invoke all --combo X` runs the whole lifecycle for X alone;
- `--exitfirst` stops after the first failed combo, still tears down and reports;
- `--failed` re-runs what failed or never ran, and says so when nothing did.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.e2e.conftest import edited_config, run_invoke
from tests.e2e.test_lifecycle_host import DEMO, FLAGS, LOCAL, combos, faulty_and_healthy


def _started(run_dir: Path) -> dict[str, float]:
    return {p.name: json.loads(p.read_text())["started"] for p in (run_dir / "stages").glob("*.json")}


def _faulty_first(tmp_path: Path, **env: str) -> tuple[list[str], str, str]:
    """Flags of a demo config whose first combo can be made to fail (OOM at step 3) through a fault
    file the simulated trainer reads at start; the file, unlike the config, may change between commands."""
    faulty, healthy = faulty_and_healthy()
    node_dir = tmp_path / "nodes" / "node0"
    node_dir.mkdir(parents=True)

    def edit(cfg):
        cfg["sweep"]["runs"] = [faulty, healthy]
        cfg["container"]["env"].update(CVS_SIM_NODE_DIR=str(node_dir), SIM_NODE_FAULTS=str(tmp_path / "faults"),
                                       SIM_FAULT_PRECISION=faulty.split("PRECISION=")[1], **env)

    (tmp_path / "faults").mkdir()
    return ["--config", str(edited_config(DEMO, tmp_path, edit)), "--cluster", str(LOCAL)], faulty, healthy


def _break(tmp_path: Path, fault: str | None) -> None:
    target = tmp_path / "faults" / "node0"
    if fault:
        target.write_text(fault)
    else:
        target.unlink(missing_ok=True)


def test_a_run_in_pieces_passes_with_the_rest_not_asked(reports):
    first, second = combos()[:2]
    up = run_invoke("container", *FLAGS, reports=reports)
    assert up.code == 0, up.out + up.err
    run = ["--run", up.run_dir.name]
    for command in (["smoke"], ["train", "--combo", first], ["metric", "--combo", first], ["teardown"]):
        res = run_invoke(*command, *run, reports=reports)
        assert res.code == 0, (command, res.out + res.err)
        assert res.run_dir == up.run_dir
    report = run_invoke("report", *run, reports=reports)
    assert report.code == 0, report.out + report.err
    results = report.results()
    assert results["verdict"] == "PASS", results["verdict_reason"]
    assert results["incomplete"] is False and results["not_run"] == []
    assert set(results["not_asked"]) == {"test_checkpoint", f"test_training[{second}]", f"test_metric[{second}]",
                                         f"test_loss_curve[{first}]", f"test_loss_curve[{second}]"}
    for name in results["not_asked"]:
        assert report.test(name)["status"] == "NOT-RUN" and report.test(name)["reason"].startswith("not asked: ")
    for name in ("test_launch_container", "test_smoke", f"test_training[{first}]", f"test_metric[{first}]",
                 "test_teardown"):
        assert report.test(name)["status"] in ("PASS", "SKIPPED"), name
    assert "harness was killed" not in report.out
    suite = ET.parse(report.run_dir / "junit.xml").getroot().find("testsuite")
    assert (suite.get("errors"), suite.get("failures")) == ("0", "0")


def test_all_for_one_combo_runs_the_whole_lifecycle_for_it_alone(reports):
    first, second = combos()[:2]
    res = run_invoke("all", "--combo", second, *FLAGS, reports=reports)
    assert res.code == 0, res.out + res.err
    results = res.results()
    assert results["verdict"] == "PASS", results["verdict_reason"]
    assert res.record("training", second)["status"] == "PASS"
    assert res.record("loss_curve", second)["status"] == "PASS"
    assert res.record("teardown")["status"] == "PASS"
    assert not any(name.startswith("training[") and second.split("PRECISION=")[1] not in name
                   for name in _started(res.run_dir))  # the other combo never trained
    assert set(results["not_asked"]) == {f"test_{s}[{first}]" for s in ("training", "metric", "loss_curve")}


def test_exitfirst_stops_after_the_first_failed_combo_tears_down_and_reports(reports, tmp_path):
    flags, faulty, healthy = _faulty_first(tmp_path)
    _break(tmp_path, "oom@3")
    res = run_invoke("all", "-x", *flags, reports=reports)
    assert res.code == 1, res.out + res.err
    assert res.record("training", faulty)["status"] == "FAIL"
    assert res.record("training", faulty)["data"]["error"]["cls"] == "oom"
    assert res.record("teardown")["status"] == "PASS"
    assert (res.run_dir / "report.html").is_file()
    results = res.results()
    assert results["verdict"] == "FAIL"
    for stage in ("training", "metric", "loss_curve"):
        row = res.test(f"test_{stage}[{healthy}]")
        assert row["status"] == "NOT-RUN", row
        assert "stopped after the first failure (--exitfirst)" in row["reason"]
    assert "--exitfirst" in res.out


def test_failed_reruns_the_failed_combo_only_and_then_has_nothing_left(reports, tmp_path):
    flags, faulty, healthy = _faulty_first(tmp_path)
    _break(tmp_path, "oom@3")
    first = run_invoke("all", *flags, reports=reports)
    assert first.code == 1, first.out + first.err
    assert first.record("training", healthy)["status"] == "PASS"
    before = _started(first.run_dir)

    _break(tmp_path, None)  # the cause is fixed
    again = run_invoke("all", "--failed", *flags, reports=reports)  # the latest run
    assert again.code == 0, again.out + again.err
    assert again.run_dir == first.run_dir
    after = _started(first.run_dir)
    assert again.record("training", faulty)["status"] == "PASS"
    for name in before:  # the passing combo and the early stages are kept, the faulty combo redone
        if faulty.split("PRECISION=")[1] in name:
            assert after[name] > before[name], name
        elif not name.startswith(("launch_container", "teardown")):
            assert after[name] == before[name], name
    assert again.results()["verdict"] == "PASS"

    done = run_invoke("all", "--failed", "--run", first.run_dir.name, *flags, reports=reports)
    assert done.code == 0, done.out + done.err
    assert "nothing to re-run" in done.out
    assert _started(first.run_dir) == after  # nothing ran
