"""DryRunDir: a dry run's run directory records in memory, reads through to the disk, writes nothing."""

from __future__ import annotations

from pathlib import Path

from cvs_tasks.run import RunDir, StageRecord
from cvs_tasks.run.events import Message
from cvs_tasks.run.rundir import DryRunDir


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_what_a_dry_run_records_is_read_back_and_never_reaches_the_disk(tmp_path):
    run = DryRunDir(tmp_path / "dry-run")
    run.write_manifest({"run_id": "dry-run", "combos": ["B", "A"]})
    run.write_record(StageRecord("training", "SKIPPED", combo="A", reason="dry run: nothing was started"))
    run.write_record(StageRecord("training", "SKIPPED", combo="B"))
    run.write_record(StageRecord("launch_container", "PASS", data={"hf_token": True}))
    run.prepare_file(run.node_log_path("training", "A", 0))
    run.write_text(run.path / "report.html", "<html>")
    with run.stage_log("training", "A", lambda event: None) as log:
        log(Message("a line"))
    assert not (tmp_path / "dry-run").exists()
    assert run.read_record("launch_container").data == {"hf_token": True}
    assert run.manifest()["combos"] == ["B", "A"]
    assert [(r.stage, r.combo) for r in run.records()] == [("launch_container", None), ("training", "B"),
                                                           ("training", "A")]
    assert not run.durable and not run.child(run.path / "diagnose" / "n1").path.exists()


def test_a_dry_run_over_a_real_run_reads_it_and_leaves_it_as_it_was(tmp_path):
    real = RunDir.create(tmp_path / "reports", "r1")
    real.write_manifest({"run_id": "r1", "combos": ["A"]})
    real.write_record(StageRecord("launch_container", "PASS"))
    real.write_record(StageRecord("training", "FAIL", combo="A", reason="OOM"))
    before = _files(real.path)

    dry = DryRunDir(real.path)
    assert dry.read_record("training", "A").reason == "OOM"
    dry.write_record(StageRecord("training", "SKIPPED", combo="A", reason="dry run: nothing was started"))
    dry.write_manifest({**dry.manifest(), "finished": 1.0})
    dry.remove_record("launch_container")  # only what the dry run recorded goes; the disk keeps its own
    assert dry.read_record("training", "A").status == "SKIPPED"
    assert {(r.stage, r.status) for r in dry.records()} == {("launch_container", "PASS"), ("training", "SKIPPED")}
    assert _files(real.path) == before
    assert real.read_record("training", "A").reason == "OOM" and "finished" not in real.manifest()


def test_a_record_read_back_is_a_copy(tmp_path):
    run = DryRunDir(tmp_path / "dry-run")
    record = StageRecord("smoke", "PASS")
    run.write_record(record)
    record.status = "FAIL"
    run.read_record("smoke").data["x"] = 1
    assert run.read_record("smoke").status == "PASS" and run.read_record("smoke").data == {}
