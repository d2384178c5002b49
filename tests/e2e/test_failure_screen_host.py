"""Issue #26 items 6 and 7 end to end on this machine (host runtime, the simulated trainer): a failed
run's last console lines name the test, the node, the cause and the log line at 80 columns (so do a
failed stage command's, for its own tests); the run,
also one made of ad hoc commands, is in the history when its command ends, its failed combo FAIL
with the reason.

The OOM is injected the way the reliability tests do (SIM_FAULT limited to one combo's precision)
into the demo config."""

from __future__ import annotations

import json
import re

from cvs_tasks.run import combo_dir
from tests.e2e.conftest import REPO, edited_config, run_invoke

DEMO = REPO / "configs" / "testbed" / "demo_host.json"
LOCAL = REPO / "cluster" / "localhost.json"
NARROW = {"COLUMNS": "80"}  # what a CI log gives rich


def faulty_and_healthy() -> tuple[str, str]:
    cfg = json.loads(DEMO.read_text())
    faulty = next(c for c in cfg["sweep"]["runs"] if not c.endswith(f"PRECISION={cfg['smoke']['precision']}"))
    return faulty, next(c for c in cfg["sweep"]["runs"] if c != faulty)


def oom_flags(tmp_path, precision: str) -> list[str]:
    cfg = edited_config(DEMO, tmp_path, lambda c: c["container"]["env"].update(
        SIM_FAULT="oom@3", SIM_FAULT_PRECISION=precision))
    return ["--config", str(cfg), "--cluster", str(LOCAL)]


def test_an_oom_run_ends_with_test_node_rank_cause_and_log_line_at_80_columns(reports, tmp_path):
    faulty, healthy = faulty_and_healthy()
    res = run_invoke("all", *oom_flags(tmp_path, faulty.split("PRECISION=")[1]), reports=reports, env=NARROW)
    assert res.code == 1, res.out + res.err
    run = res.run_dir
    lines = res.out.rstrip("\n").splitlines()

    assert lines[-1] == f"Report: {run / 'report.html'}"
    assert lines[-3] == "Verdict: FAIL - 1 failed"
    failure = lines[-2]
    log = run / "logs" / "training" / combo_dir(faulty) / "out-node0" / "training.log"
    found = re.fullmatch(rf"FAIL test_training\[{re.escape(faulty)}\] on node localhost, rank (\d+): gpu_oom \(oom\) "
                         rf"at {re.escape(str(log))}:(\d+): (\[rank(\d+)\]: .*OutOfMemoryError.*)", failure)
    assert found, failure
    rank, line_no, text, line_rank = found.groups()
    assert rank == line_rank  # the rank the failing line names, not the node's place in the cluster
    logged = log.read_text(errors="replace").splitlines()[int(line_no) - 1]
    assert logged.startswith(text.removesuffix("...")) and "out of memory" in logged.lower()

    for name in (f"test_training[{faulty}]", f"test_training[{healthy}]", f"test_metric[{faulty}]"):
        assert any(name in line for line in lines), name  # whole test names: never folded in a table cell

    callout = (run / "report.html").read_text()
    callout = callout[callout.index('id="first-failure"'):callout.index('class="counts"')]
    assert f"node localhost, rank {rank}" in callout
    assert f'href="logs/training/{combo_dir(faulty)}/out-node0/training.log">node log</a> (line {line_no})' in callout

    listed = run_invoke("history", "--json", reports=reports)
    assert listed.code == 0, listed.out + listed.err
    (row,) = json.loads(listed.out)
    assert row["run_id"] == run.name and row["combos"] == {healthy: "PASS", faulty: "FAIL"}
    assert "gpu_oom" in row["combo_reasons"][faulty]


def test_an_empty_history_and_an_ad_hoc_run_after_its_command(reports, tmp_path):
    empty = run_invoke("history", reports=reports, env=NARROW)
    assert empty.code == 0 and len(empty.out.splitlines()) == 1 and "no runs recorded yet" in empty.out, empty.err

    _, healthy = faulty_and_healthy()
    flags = ["--config", str(edited_config(DEMO, tmp_path, lambda c: None)), "--cluster", str(LOCAL)]
    trained = run_invoke("train", "--combo", healthy, *flags, reports=reports)
    assert trained.code == 0, trained.out + trained.err
    run_id = trained.run_dir.name
    listed = run_invoke("history", "--json", reports=reports)  # no history.rebuild needed
    (row,) = json.loads(listed.out)
    assert row["run_id"] == run_id and row["combos"][healthy] == "NOT-RUN"  # trained, not judged yet
    assert row["combo_reasons"][healthy].startswith("not asked")  # its gates: no command asked for them yet

    judged = run_invoke("metric", "--combo", healthy, "--run", run_id, reports=reports)
    assert judged.code == 0, judged.out + judged.err
    (row,) = json.loads(run_invoke("history", "--json", reports=reports).out)  # the same row, updated
    assert row["run_id"] == run_id and row["combos"][healthy] == "PASS"

    down = run_invoke("teardown", "--run", run_id, reports=reports)
    assert down.code == 0, down.out + down.err
    shown = run_invoke("history", reports=reports, env=NARROW)
    assert shown.code == 0 and any(line.startswith(f"{run_id}  ") for line in shown.out.splitlines()), shown.out


def test_a_failed_stage_command_ends_with_its_failure_line(reports, tmp_path):
    faulty, _ = faulty_and_healthy()
    flags = oom_flags(tmp_path, faulty.split("PRECISION=")[1])
    res = run_invoke("train", "--combo", faulty, *flags, reports=reports, env=NARROW)
    try:
        assert res.code == 1, res.out + res.err
        last = res.out.rstrip("\n").splitlines()[-1]
        log = res.run_dir / "logs" / "training" / combo_dir(faulty) / "out-node0" / "training.log"
        assert last.startswith(f"FAIL test_training[{faulty}] on node localhost, rank "), last
        assert f"gpu_oom (oom) at {log}:" in last and "OutOfMemoryError" in last, last
    finally:
        down = run_invoke("teardown", "--run", res.run_dir.name, reports=reports)
        assert down.code == 0, down.out + down.err
