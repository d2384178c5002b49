"""A run directory is data, not a way out: a tampered one (an absolute or `..` log path in a record,
a `javascript:` link, a symlink to a file elsewhere, a manifest naming a history database elsewhere,
fields of the wrong kind) is an error line naming the file and the field (exit 2), never a
traceback; no file outside the run directory is read into the report, written, truncated or
created; every link the report holds is a relative path of the run."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from urllib.parse import unquote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cvs_tasks.errors import BadInput
from cvs_tasks.report.html import render_report
from cvs_tasks.report.render import render_all
from cvs_tasks.run.events import Message, StageLog
from cvs_tasks.run.records import StageRecord
from cvs_tasks.run.rundir import RunDir
from cvs_tasks.run.sandbox import href, open_for_write, relative_problem
from tests.hostile.hostile_helpers import LOCAL_CLUSTER, REPO, assert_refused

FIXTURES = REPO / "tests" / "fixtures" / "rundir"
FP8 = "training[MBS_4_GBS_128_PRECISION_FP8].json"
NODE0 = "logs/training/MBS_4_GBS_128_PRECISION_FP8/out-node0/training.log"
OUTSIDE_TEXT = "OUTSIDE-SECRET-7f3a: a file that is not part of any run\n"


@pytest.fixture
def outside(tmp_path) -> Path:
    """A file outside every run directory, with a canary line (and enough lines for a log context)."""
    path = tmp_path / "elsewhere" / "private.log"
    path.parent.mkdir()
    path.write_text(OUTSIDE_TEXT * 20)
    return path


def copy_run(sandbox, name: str = "failed_nccl") -> Path:
    target = sandbox.reports / name
    shutil.copytree(FIXTURES / name, target)
    return target


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def report_files(run: Path) -> dict[str, str]:
    return {p.name: p.read_text(errors="replace") for p in run.iterdir()
            if p.is_file() and p.suffix in (".html", ".json", ".xml")}


def assert_outside_untouched(outside: Path, run: Path) -> None:
    assert outside.read_text() == OUTSIDE_TEXT * 20
    for name, text in report_files(run).items():
        assert "OUTSIDE-SECRET" not in text, name


# -- paths in records ----------------------------------------------------------------------------
@pytest.mark.parametrize("field, value, words", [
    ("node", "ABSOLUTE", "absolute path"),
    ("node", "../../elsewhere/private.log", "'..'"),
    ("node", "javascript:alert(document.cookie)", "looks like a URL"),
    ("node", "data:text/html,<script>alert(1)</script>", "looks like a URL"),
    ("node", "https://evil.example/x.log", "looks like a URL"),
    ("node", 12, "not a path"),
    ("node", "logs/a\nb.log", "control character"),
    ("artifact", "ABSOLUTE", "absolute path"),
    ("artifact", ["logs/x.log"], "not a path"),
])
def test_a_record_naming_a_file_outside_is_an_error_line(sandbox, outside, field, value, words):
    run = copy_run(sandbox)
    value = str(outside) if value == "ABSOLUTE" else value

    def change(rec):
        if field == "node":
            rec["nodes"][1]["log"] = value
        else:
            rec["artifacts"]["node 1 log"] = value

    edit_json(run / "stages" / FP8, change)
    res = sandbox.cli("report", "--run", str(run))
    named = "nodes[1].log" if field == "node" else "artifacts.node 1 log"
    assert_refused(res, f"stages/{FP8}: {named}", words)
    assert_outside_untouched(outside, run)


def test_a_symlinked_node_log_pointing_outside_is_an_error_line_and_never_read(sandbox, outside):
    run = copy_run(sandbox)
    log = run / NODE0.replace("out-node0", "out-node1")
    log.unlink()
    log.symlink_to(outside)
    res = sandbox.cli("report", "--run", str(run))
    assert_refused(res, "leads outside the run directory", "out-node1/training.log")
    assert_outside_untouched(outside, run)


@pytest.mark.parametrize("what", ["record", "stages folder", "manifest"])
def test_a_record_folder_or_manifest_symlinked_outside_is_an_error_line(sandbox, outside, tmp_path, what):
    run = copy_run(sandbox)
    elsewhere = tmp_path / "elsewhere"
    if what == "record":
        fake = elsewhere / "fake.json"
        fake.write_text(json.dumps({"stage": "smoke", "status": "PASS", "reason": OUTSIDE_TEXT}))
        (run / "stages" / "smoke.json").unlink()
        (run / "stages" / "smoke.json").symlink_to(fake)
    elif what == "stages folder":
        shutil.move(run / "stages", elsewhere / "stages")
        (run / "stages").symlink_to(elsewhere / "stages")
    else:
        shutil.move(run / "run.json", elsewhere / "run.json")
        (run / "run.json").symlink_to(elsewhere / "run.json")
    res = sandbox.cli("report", "--run", str(run))
    assert_refused(res, "outside the run directory")
    assert_outside_untouched(outside, run)


def test_the_log_context_of_the_first_failure_is_read_only_inside_the_run(fixture_run_dir, outside):
    """Defence in depth: even a results row naming an outside log reads nothing of it."""
    from cvs_tasks.report.first_failure import first_failure

    tests = [{"name": "test_training[X]", "status": "FAIL", "stage": "training", "started": 1.0,
              "details": {"error": {"host": "n0", "line": 3, "name": "x", "text": "boom"}},
              "nodes": [{"host": "n0", "status": "FAIL", "log": log}]}
             for log in (str(outside), "../elsewhere/private.log", "logs/../../elsewhere/private.log")]
    for test in tests:
        assert first_failure([test], fixture_run_dir)["context"] == []


def test_report_links_are_relative_paths_of_the_run_and_never_a_scheme():
    bad = ["javascript:alert(1)", "data:text/html,x", "https://evil.example/", "//evil.example/x", "/etc/passwd",
           "../x.log", "JaVaScRiPt:alert(1)", " javascript:alert(1)", "\tjavascript:alert(1)", ""]
    for value in bad:
        assert href(value) == "", value
        assert relative_problem(value)
    assert href("logs/javascript:alert(1)") == "logs/javascript%3Aalert%281%29"
    assert href("logs/training[MBS_4].log") == "logs/training%5BMBS_4%5D.log"
    results = {"verdict": "FAIL", "run_id": "x", "combos": [], "counts": {}, "metric_counts": {},
               "tests": [{"name": "test_smoke", "stage": "smoke", "status": "FAIL", "reason": "",
                          "logs": [{"label": "node log", "path": p, "exists": True} for p in bad]}],
               "first_failure": {"test": "test_smoke", "log": "javascript:alert(1)", "context": []}}
    html = render_report(results)
    hrefs = re.findall(r'href="([^"]*)"', html)
    assert hrefs and all(h.startswith("#") or ":" not in unquote(h).split("/")[0] for h in hrefs), hrefs
    assert "javascript" not in html.lower()


# -- writes ---------------------------------------------------------------------------------------
def test_teardown_force_never_truncates_through_a_symlinked_stage_log(sandbox, outside):
    config = sandbox.config()
    first = sandbox.cli("teardown", "--config", str(config), "--cluster", str(LOCAL_CLUSTER), "--run", "r3")
    assert first.code == 0 and "Traceback" not in first.text, first.text[-3000:]
    log = sandbox.reports / "r3" / "logs" / "teardown.log"
    assert log.is_file()
    log.unlink()
    log.symlink_to(outside)
    again = sandbox.cli("teardown", "--force", "--config", str(config), "--cluster", str(LOCAL_CLUSTER),
                        "--run", "r3")
    assert again.code == 0 and "Traceback" not in again.text, again.text[-3000:]
    assert outside.read_text() == OUTSIDE_TEXT * 20
    assert not log.is_symlink() and "started" in log.read_text()


def test_a_stage_log_hard_linked_or_symlinked_outside_is_replaced_not_written_through(tmp_path, outside):
    run = RunDir(tmp_path / "run")
    (run.logs_dir).mkdir(parents=True)
    for plant in (os.link, os.symlink):
        path = run.stage_log_path("teardown")
        path.unlink(missing_ok=True)
        plant(outside, path)
        with StageLog(path, lambda e: None, root=run.path) as log:
            log(Message("removing containers"))
        assert outside.read_text() == OUTSIDE_TEXT * 20
        assert not path.is_symlink() and os.stat(path).st_nlink == 1 and "removing" in path.read_text()


def test_a_folder_of_the_run_symlinked_outside_receives_no_write(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    (run.path / "stages").symlink_to(elsewhere)
    (run.path / "logs").symlink_to(elsewhere)
    with pytest.raises(BadInput, match="stages: a symlink inside the run directory"):
        run.write_record(StageRecord("smoke", "PASS"))
    with pytest.raises(BadInput, match="logs: a symlink"):
        run.prepare_file(run.node_log_path("training", "C", 0))
    with StageLog(run.stage_log_path("smoke"), lambda e: None, root=run.path) as log:  # best effort: no log
        log(Message("hello"))
    assert list(elsewhere.iterdir()) == []


def test_a_file_the_run_appends_to_planted_as_a_symlink_is_unlinked_first(tmp_path, outside):
    run = RunDir(tmp_path / "run")
    srun = run.logs_dir / "training" / "srun.log"
    srun.parent.mkdir(parents=True)
    srun.symlink_to(outside)
    with open(run.prepare_file(srun), "ab") as fh:  # as the Slurm step opens its output
        fh.write(b"srun: step 3 started\n")
    assert outside.read_text() == OUTSIDE_TEXT * 20 and not srun.is_symlink()


def test_a_node_log_copy_planted_as_a_symlink_is_replaced(tmp_path, outside):
    copy = tmp_path / "run" / "training.log"
    copy.parent.mkdir()
    copy.symlink_to(outside)
    with open_for_write(copy) as fh:
        fh.write(b"node bytes\n")
    assert outside.read_text() == OUTSIDE_TEXT * 20
    assert copy.read_bytes() == b"node bytes\n" and not copy.is_symlink()


# -- the history database ------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["empty file", "missing file"])
def test_the_manifest_history_path_is_never_written(sandbox, tmp_path, kind):
    run = copy_run(sandbox)
    target = tmp_path / "elsewhere" / "victim.sqlite"
    target.parent.mkdir(exist_ok=True)
    if kind == "empty file":
        target.write_bytes(b"")
    edit_json(run / "run.json", lambda m: m["effective_config"].setdefault("history", {}).update(path=str(target)))
    res = sandbox.cli("report", "--run", str(run))
    assert res.code == 1 and "Traceback" not in res.text, res.text[-3000:]  # the fixture run failed
    assert sorted(p.name for p in target.parent.iterdir()) == (["victim.sqlite"] if kind == "empty file" else [])
    if kind == "empty file":
        assert target.read_bytes() == b""


# -- the manifest, field by field ----------------------------------------------------------------
HUGE = "x" * 100_000
BAD_VALUES = {
    "created": ["yesterday", -5, 1e300, True, [1], {"t": 1}],
    "finished": ["now", -1, 10**20],
    "hosts": ["n1,n2", [1, 2], [HUGE], {"a": 1}, ["ok"] * 100_001],
    "combos": ["MBS=4", [None], [["nested"]]],
    "config_file": [12, ["a"], HUGE],
    "cluster_file": [False, {}],
    "interrupted": ["yes", 1],
    "gpus_per_node": ["8", -1, 8.5, 2**40],
    "effective_config": ["{}", [1]],
    "slurm": ["job 12", [1]],
    "run_id": [42],
    "image": [HUGE, 3.5],
}


@pytest.mark.parametrize("field, value", [(f, v) for f, vs in BAD_VALUES.items() for v in vs],
                         ids=lambda x: repr(x)[:30])
def test_a_manifest_field_of_the_wrong_kind_is_an_error_naming_the_field(fixture_run_dir, field, value):
    edit_json(fixture_run_dir / "run.json", lambda m: m.update({field: value}))
    with pytest.raises(BadInput) as info:
        render_all(RunDir(fixture_run_dir))
    message = str(info.value)
    assert "run.json" in message and f"{field}: should be" in message and len(message) < 2000
    assert not (fixture_run_dir / "report.html").exists()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(sorted(BAD_VALUES) + ["suite", "backend", "threshold_file", "warnings", "scope"]),
       value=st.recursive(st.none() | st.booleans() | st.integers(-2**40, 2**40)
                          | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
                          lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                  st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                          max_leaves=8),
       drop=st.booleans())
def test_any_tampered_manifest_field_renders_or_is_a_bad_input(fixture_run_dir, field, value, drop):
    def change(m):
        if drop:
            m.pop(field, None)
        else:
            m[field] = value

    original = (fixture_run_dir / "run.json").read_text()
    try:
        edit_json(fixture_run_dir / "run.json", change)
        try:
            render_all(RunDir(fixture_run_dir))
        except BadInput as exc:
            assert f"{field}: should be" in str(exc)
    finally:
        (fixture_run_dir / "run.json").write_text(original)


@pytest.mark.parametrize("field, value", [("hosts", "n1"), ("created", "yesterday"), ("config_file", 7),
                                          ("combos", {"a": 1}), ("slurm", "job")])
def test_commands_reading_a_tampered_manifest_say_which_field(sandbox, field, value):
    run = copy_run(sandbox)
    edit_json(run / "run.json", lambda m: m.update({field: value}))
    for args in (("report", "--run", str(run)),
                 ("teardown", "--run", str(run), "--config", str(sandbox.config()), "--cluster", str(LOCAL_CLUSTER))):
        res = sandbox.cli(*args)
        assert_refused(res, "run.json", f"{field}: should be")


@pytest.fixture
def fixture_run_dir(tmp_path) -> Path:
    target = tmp_path / "runs" / "failed_nccl"
    shutil.copytree(FIXTURES / "failed_nccl", target)
    return target
