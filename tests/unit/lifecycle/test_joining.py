"""Which run a command works on (README, "Chaining rules"): the latest run while it is open; a finished
or torn-down run only by name when the command would launch containers or train; judging a closed
run's records always; a command that only judges never starts a run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cvs_tasks.errors import BadInput
from cvs_tasks.lifecycle.session import resolve_run
from cvs_tasks.run import RunDir, StageRecord
from cvs_tasks.run.rundir import RunRequest
from cvs_tasks.run.stages import LAUNCH_CONTAINER, TEARDOWN
from cvs_tasks.run.state import run_line, run_state


def make_run(root: Path, config: Path, *, finished: bool = False, launched_at: float | None = None,
             torn_down_at: float | None = None) -> RunDir:
    run = RunDir.create(root)
    manifest = {"run_id": run.run_id, "created": time.time() - 100, "config_file": str(config.resolve()),
                "cluster_file": "/c/cluster.json"}
    if finished:
        manifest["finished"] = time.time()
    run.write_manifest(manifest)
    if launched_at is not None:
        run.write_record(StageRecord(LAUNCH_CONTAINER.id, "PASS", started=launched_at, ended=launched_at + 1))
    if torn_down_at is not None:
        run.write_record(StageRecord(TEARDOWN.id, "PASS", started=torn_down_at, ended=torn_down_at + 1))
    return run


@pytest.fixture
def place(tmp_path):
    config = tmp_path / "x.json"
    config.write_text("{}")
    return tmp_path / "reports", config


def resolve(root: Path, **request):
    return resolve_run(RunRequest(reports_dir=str(root), **request), root)


def test_an_open_run_is_joined_by_any_stage_command(place):
    root, config = place
    run = make_run(root, config, launched_at=100.0)
    for launches in (True, False):
        found, how = resolve(root, launches=launches)
        assert found.path == run.path and how.startswith("joins the open run (started ")
    found, _ = resolve(root, config=str(config))
    assert found.path == run.path  # the same config: the same run


def test_a_finished_run_is_not_joined_by_a_command_that_would_launch(place):
    root, config = place
    run = make_run(root, config, finished=True)
    with pytest.raises(BadInput) as refused:
        resolve(root, launches=True)
    text = str(refused.value)
    assert f"the latest run {run.run_id} is over (finished " in text
    assert f"--run {run.run_id}   adds to that run" in text and "--config <file>   starts a new run" in text


def test_a_finished_run_is_joined_to_judge_it(place):
    root, config = place
    run = make_run(root, config, finished=True)
    found, how = resolve(root, launches=False)
    assert found.path == run.path and "launches nothing" in how
    found, _ = resolve(root, config=str(config), launches=False)
    assert found.path == run.path


def test_a_named_config_after_a_finished_run_starts_a_new_one(place):
    root, config = place
    run = make_run(root, config, finished=True)
    found, how = resolve(root, config=str(config), launches=True)
    assert found is None and how.startswith(f"new run (the latest run of this config, {run.run_id}, is over")


def test_a_named_run_is_joined_open_or_not(place):
    root, config = place
    run = make_run(root, config, finished=True)
    for name in (run.run_id, "latest", str(run.path)):
        found, how = resolve(root, run=name, launches=True)
        assert found.path == run.path and how.startswith("adds to the run (finished ")


def test_an_ad_hoc_run_is_over_once_torn_down_and_open_again_once_relaunched(place):
    root, config = place
    run = make_run(root, config, launched_at=100.0, torn_down_at=200.0)
    state = run_state(run)
    assert not state.open and state.detail.startswith("torn down ")
    with pytest.raises(BadInput):
        resolve(root, launches=True)
    run.write_record(StageRecord(LAUNCH_CONTAINER.id, "PASS", started=300.0, ended=301.0))  # `--run` relaunched it
    assert run_state(run).open
    assert resolve(root, launches=True)[0].path == run.path


def test_a_killed_harness_leaves_the_run_open(place):
    """No finished stamp, no teardown: the next command joins it and finds what it left."""
    root, config = place
    run = make_run(root, config, launched_at=100.0)
    assert run_state(run).open
    assert resolve(root, launches=True)[0].path == run.path


def test_judging_never_starts_a_run_and_teardown_may(place, tmp_path):
    root, config = place
    with pytest.raises(BadInput, match="there is no run in .* to judge"):
        resolve(root, launches=False, judges=True)
    assert resolve(root, launches=False) == (None, "new run")  # teardown, as before
    with pytest.raises(BadInput, match="--run latest: there is no run"):
        resolve(root, run="latest", launches=True)
    make_run(root, config)
    other = tmp_path / "y.json"
    other.write_text("{}")
    with pytest.raises(BadInput, match="no run of config .*y.json to judge"):
        resolve(root, config=str(other), launches=False, judges=True)
    with pytest.raises(BadInput, match="--run nope: no such run .* nothing to judge"):
        resolve(root, run="nope", launches=False, judges=True)
    assert resolve(root, config=str(other), launches=True) == (None, "new run")  # another config: another run
    assert resolve(root, run="nope", launches=False) == (None, "new run")  # made with that id


def test_the_first_line_names_run_how_config_and_cluster(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = run_line("r1", "new run", tmp_path / "site" / "x.json", "/etc/cvs/cluster.json")
    assert line == "run r1: new run; config site/x.json, cluster /etc/cvs/cluster.json"
    assert run_line(None, "new run", "x.json", "c.json", dry_run=True) == \
        "dry run (nothing is written): new run; config x.json, cluster c.json"
    assert run_line("r1", "joins the open run (started x)", "x.json", "c.json", dry_run=True).startswith(
        "dry run (nothing is written) on run r1: joins the open run")


def test_a_missing_config_is_named_before_the_default_cluster_is_read(tmp_path, monkeypatch):
    """The repo's cluster/cluster.json full of `<changeme>` used to be reported instead of x.json."""
    from cvs_tasks.lifecycle.session import open_session

    (tmp_path / "cluster").mkdir()
    (tmp_path / "cluster" / "cluster.json").write_text('{"username": "<changeme>", "node_dict": {}}')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadInput) as refused:
        open_session(RunRequest(config="x.json", new=True, dry_run=True))
    assert str(refused.value).startswith("--config x.json: config file not found (tried ")
    (tmp_path / "x.json").mkdir()
    with pytest.raises(BadInput, match=r"^--config x.json: the config file is a directory"):
        open_session(RunRequest(config="x.json", new=True, dry_run=True))
    with pytest.raises(BadInput, match=r"^--cluster k.json: cluster file not found"):
        open_session(RunRequest(config=str(tmp_path / "cluster" / "cluster.json"), cluster="k.json", new=True))
