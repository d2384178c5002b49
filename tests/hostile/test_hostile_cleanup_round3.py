"""Hostile input for `invoke cleanup` and the log-folder lock (issue #29, items 1 and 8), through the
real CLI on this machine (the `localhost` cluster: a real node, a temporary folder).

`paths.scripts_dir` is a home-like folder holding the user's own work, a symlink to a folder outside,
forged and garbage markers, other users' folders and real run folders: only the real run folders
go. A lock with garbage in it refuses a run (and is never cleared on a guess); a stale one is.
"""

from __future__ import annotations

import getpass
import json
import os
import subprocess
from pathlib import Path

import pytest

from cvs_tasks.jobs import nodedir, nodelock
from cvs_tasks.jobs.nodedir import RunMarker
from tests.hostile.hostile_helpers import LOCAL_CLUSTER, TOKEN, Sandbox

ME = getpass.getuser()
REAL = ("20261203-101500-ab12", "20261203-111500-cd34")


def make_run_folder(base: Path, run_id: str, owner: str = ME) -> Path:
    """A run folder made by the harness's own command (marker included), with a script in it."""
    folder = base / run_id
    res = subprocess.run(["bash", "-c", nodedir.create_folder_command(str(folder), RunMarker(run_id, owner, "h", 1))],
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    (folder / "smoke").mkdir()
    (folder / "smoke" / "node0.sh").write_text("true\n")
    return folder


@pytest.fixture
def home(sandbox: Sandbox) -> tuple[Path, Path, Path]:
    """A home-like scripts_dir full of things cleanup must not touch, plus two real run folders."""
    home = sandbox.root / "home"
    (home / "Documents").mkdir(parents=True)
    (home / "Documents" / "thesis.tex").write_text("years of work")
    (home / "projects" / "app").mkdir(parents=True)
    (home / ".bashrc").write_text("# mine\n")
    outside = sandbox.root / "outside"
    (outside / "data").mkdir(parents=True)
    (outside / ".cvs-run").write_text(RunMarker("linked", ME, "h", 1).to_json())
    (home / "linked").symlink_to(outside)  # a symlinked "run folder": never followed
    forged = home / "20261203-090000-0001"
    forged.mkdir()
    (forged / ".cvs-run").write_text(RunMarker(REAL[0], ME, "h", 1).to_json())  # names another run id
    garbage = home / "20261203-090000-0002"
    garbage.mkdir()
    (garbage / ".cvs-run").write_bytes(b"\x1b[2J\x00{{{ not json")
    linked_marker = home / "20261203-090000-0003"
    linked_marker.mkdir()
    (sandbox.root / "real-marker").write_text(RunMarker(linked_marker.name, ME, "h", 1).to_json())
    (linked_marker / ".cvs-run").symlink_to(sandbox.root / "real-marker")
    for run_id in REAL:
        make_run_folder(home, run_id)
    config = sandbox.config(lambda cfg: cfg["paths"].update(scripts_dir=str(home)))
    return home, outside, config


def cleanup(sandbox: Sandbox, config: Path, *extra: str):
    return sandbox.cli("cleanup", "--config", str(config), "--cluster", str(LOCAL_CLUSTER), *extra)


def untouched(home: Path, outside: Path) -> None:
    assert (home / "Documents" / "thesis.tex").read_text() == "years of work"
    assert (home / "projects" / "app").is_dir() and (home / ".bashrc").is_file()
    assert (home / "linked").is_symlink() and (outside / "data").is_dir() and (outside / ".cvs-run").is_file()
    for name in ("20261203-090000-0001", "20261203-090000-0002", "20261203-090000-0003"):
        assert (home / name).is_dir(), name


def test_dry_run_lists_exactly_the_real_run_folders_and_says_why_the_rest_stays(sandbox, home):
    home, outside, config = home
    res = cleanup(sandbox, config, "--dry-run")
    assert res.code == 0, res.text[-3000:]
    removing = [line for line in res.out.splitlines() if "would remove:" in line]
    assert sorted(line.split(" folder ")[1].split(" (")[0] for line in removing) == sorted(str(home / r) for r in REAL)
    for name, why in (("Documents", "no .cvs-run marker"), ("projects", "no .cvs-run marker"),
                      ("linked", "symbolic link (never followed)"), ("20261203-090000-0001", f"names run {REAL[0]}"),
                      ("20261203-090000-0002", "marker is not JSON"),
                      ("20261203-090000-0003", ".cvs-run is a symbolic link")):
        line = next((ln for ln in res.out.splitlines() if f"kept {home / name}: " in ln), "")
        assert why in line, (name, res.out[-3000:])
    assert "\x1b" not in res.text
    untouched(home, outside)
    assert all((home / r).is_dir() for r in REAL)


def test_cleanup_removes_only_the_marked_run_folders(sandbox, home):
    home, outside, config = home
    res = cleanup(sandbox, config)
    assert res.code == 0, res.text[-3000:]
    assert not any((home / r).exists() for r in REAL)
    untouched(home, outside)
    assert "Traceback" not in res.text and TOKEN not in res.text


def test_a_marker_of_another_owner_needs_all_owners_and_unmarked_folders_stay_even_then(sandbox, home):
    home, outside, config = home
    theirs = make_run_folder(home, "20261203-121500-ef56", owner="someone-else")
    their_work = home / "their-work"
    their_work.mkdir()
    if os.geteuid() == 0:  # as root, make both really another user's
        for path in (theirs, theirs / ".cvs-run", their_work):
            os.chown(path, 65534, 65534)
    res = cleanup(sandbox, config, "--run", theirs.name)
    assert res.code == 0 and theirs.is_dir(), res.text[-3000:]
    assert "a run of someone-else (--all-owners takes it)" in res.out
    res = cleanup(sandbox, config, "--all-owners")
    assert res.code == 0, res.text[-3000:]
    assert not theirs.exists() and their_work.is_dir()
    untouched(home, outside)


def test_a_lock_with_garbage_refuses_a_run_and_is_not_cleared_on_a_guess(sandbox):
    config = sandbox.config()
    lock = sandbox.node / "logs" / ".cvs-lock"
    lock.mkdir(parents=True)
    (lock / "holder").write_bytes(b"\x1b]0;pwned\x07" + b"A" * 5000)
    res = sandbox.cli("all", "--config", str(config), "--cluster", str(LOCAL_CLUSTER), timeout=300)
    assert res.code == 3, res.text[-3000:]  # the nodes are busy: infrastructure, not bad input
    assert "is in use by an unreadable lock" in res.text and "invoke cleanup" in res.text
    assert "\x1b" not in res.text and "Traceback" not in res.text
    assert (lock / "holder").read_bytes().startswith(b"\x1b]0;pwned")  # the refused run left it alone
    res = sandbox.cli("cleanup", "--config", str(config), "--cluster", str(LOCAL_CLUSTER))
    assert res.code == 0 and "kept lock" in res.out and (lock / "holder").is_file(), res.text[-3000:]


def test_a_stale_lock_is_cleared_by_cleanup_and_a_live_one_is_kept(sandbox):
    from cvs_tasks.lifecycle.node_folders import this_host

    config = sandbox.config()
    logs = str(sandbox.node / "logs")
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = nodelock.LockHolder("20261203-080000-dead", ME, this_host(), dead.pid, 1)
    assert subprocess.run(["bash", "-c", nodelock.take_command(logs, stale)], capture_output=True).returncode == 0
    res = cleanup(sandbox, config, "--dry-run")
    assert f"stale lock {logs}/.cvs-lock of run {stale.run_id}" in res.out and "is gone" in res.out, res.out
    assert (Path(logs) / ".cvs-lock").is_dir()
    res = cleanup(sandbox, config)
    assert res.code == 0 and not (Path(logs) / ".cvs-lock").exists(), res.text[-3000:]

    live = nodelock.LockHolder("20261203-080000-live", ME, this_host(), os.getpid(), 1)
    subprocess.run(["bash", "-c", nodelock.take_command(logs, live)], check=True, capture_output=True)
    res = cleanup(sandbox, config)
    assert res.code == 0 and "kept lock" in res.out and f"run {live.run_id}" in res.out
    assert json.loads((Path(logs) / ".cvs-lock" / "holder").read_text())["run_id"] == live.run_id


def test_run_id_outside_the_per_run_fields_is_refused_at_load(sandbox):
    """`{run-id}` in scripts_dir would make every run folder unfindable by cleanup: exit 2 at load."""
    from tests.hostile.hostile_helpers import assert_refused

    config = sandbox.config(lambda cfg: cfg["paths"].update(scripts_dir=str(sandbox.node / "{run-id}")))
    assert_refused(sandbox.validate(config), "paths.scripts_dir", "{run-id} is only filled in paths.log_dir")
    assert_refused(sandbox.dry_run(config), "{run-id} is only filled in paths.log_dir")
    accepted = sandbox.config(lambda cfg: cfg["paths"].update(log_dir=str(sandbox.node / "{run-id}" / "logs")),
                              name="per_run.json")
    assert sandbox.validate(accepted).code == 0
