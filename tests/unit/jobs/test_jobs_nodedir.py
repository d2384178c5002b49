"""The run-folder marker and the clean-up verdicts: pure (plain rows in, verdicts out), then the
node commands run for real in bash on a temporary folder."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from cvs_tasks.jobs import nodedir
from cvs_tasks.jobs.nodedir import FolderEntry, RunMarker, folder_verdict, parse_marker, parse_scan

RUN = "20261203-101500-ab12"
MARK = RunMarker(RUN, "alice", "head01", 1764756900)


def bash(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=30)


def entry(name=RUN, kind="dir", mine=True, state="file", text=None) -> FolderEntry:
    return FolderEntry(name, kind, mine, state, MARK.to_json() if text is None else text)


# -- the marker --------------------------------------------------------------------------------
def test_a_marker_round_trips():
    assert parse_marker(MARK.to_json()) == (MARK, "")


@pytest.mark.parametrize("text, why", [
    ("", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"run_id": "x"}', "lacks created, host, owner"),
    (json.dumps({**json.loads(MARK.to_json()), "run_id": "../etc"}), "run_id is not a run id"),
    (json.dumps({**json.loads(MARK.to_json()), "owner": "a b"}), "owner is not a user name"),
    (json.dumps({**json.loads(MARK.to_json()), "host": 7}), "host is not a host name"),
    (json.dumps({**json.loads(MARK.to_json()), "created": True}), "created is not a time"),
    (json.dumps({**json.loads(MARK.to_json()), "created": -5}), "created is not a time"),
])
def test_a_marker_that_does_not_parse_says_why(text, why):
    marker, reason = parse_marker(text)
    assert marker is None and why in reason


# -- verdicts ------------------------------------------------------------------------------------
def test_only_a_folder_whose_marker_names_it_is_removed():
    verdict = folder_verdict(entry(), owner="alice")
    assert verdict.remove and "run 20261203-101500-ab12 of alice from head01" in verdict.reason


@pytest.mark.parametrize("row, why", [
    (entry(name="Documents", state="none", text=""), "no .cvs-run marker"),
    (entry(kind="link", state="-", text=""), "symbolic link"),
    (entry(kind="other", state="-", text=""), "not a folder"),
    (entry(name="a??b", kind="badname", state="-", text=""), "not a run id"),
    (entry(name="..", state="file"), "not a run id"),
    (entry(state="link", text=""), ".cvs-run is a symbolic link"),
    (entry(state="notfile", text=""), "not a regular file"),
    (entry(text="garbage{"), "not JSON"),
    (entry(name="20261203-101500-ffff"), "names run 20261203-101500-ab12, not 20261203-101500-ffff"),
    (entry(text=RunMarker(RUN, "bob", "h", 1).to_json()), "a run of bob"),
    (entry(mine=False), "owned by another user"),
])
def test_everything_else_is_kept_with_its_reason(row, why):
    verdict = folder_verdict(row, owner="alice")
    assert not verdict.remove and why in verdict.reason


def test_all_owners_takes_other_users_marked_runs_and_nothing_unmarked():
    assert folder_verdict(entry(text=RunMarker(RUN, "bob", "h", 1).to_json(), mine=False), owner=None).remove
    assert not folder_verdict(entry(name="projects", state="none", text=""), owner=None).remove
    assert not folder_verdict(entry(kind="link", state="-", text=""), owner=None).remove


def test_scan_rows_parse_and_torn_rows_are_dropped():
    rows = f"{RUN}\tdir\tmine\tfile\t{MARK.to_json()}\nDocuments\tdir\tother\tnone\t\nbroken\tdir\n"
    assert [e.name for e in parse_scan(rows)] == [RUN, "Documents"]
    assert parse_scan(rows)[1] == FolderEntry("Documents", "dir", False, "none", "")


def test_the_removal_command_refuses_names_that_are_not_run_ids():
    with pytest.raises(ValueError):
        nodedir.remove_runs_command("/x", ["../home"])
    assert nodedir.remove_runs_command("/x", []) == "true"


# -- the commands, for real ------------------------------------------------------------------------
def test_create_writes_the_marker_once_and_refuses_a_symlinked_folder(tmp_path):
    folder = tmp_path / "scripts" / RUN
    assert bash(nodedir.create_folder_command(str(folder), MARK)).returncode == 0
    assert parse_marker((folder / ".cvs-run").read_text())[0] == MARK
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    later = RunMarker(RUN, "alice", "head01", MARK.created + 60)
    assert bash(nodedir.create_folder_command(str(folder), later)).returncode == 0
    assert parse_marker((folder / ".cvs-run").read_text())[0] == MARK  # a later command keeps the first

    outside = tmp_path / "outside"
    outside.mkdir()
    link = tmp_path / "scripts" / "20261203-101500-0000"
    link.symlink_to(outside)
    res = bash(nodedir.create_folder_command(str(link), RunMarker(link.name, "alice", "h", 1)))
    assert res.returncode != 0 and "symbolic link" in res.stderr
    assert list(outside.iterdir()) == []


def test_create_refuses_a_symlinked_marker(tmp_path):
    folder = tmp_path / RUN
    folder.mkdir()
    target = tmp_path / "victim"
    target.write_text("keep me")
    (folder / ".cvs-run").symlink_to(target)
    res = bash(nodedir.create_folder_command(str(folder), MARK))
    assert res.returncode != 0 and "not a regular file" in res.stderr
    assert target.read_text() == "keep me"


def test_scan_and_remove_on_a_real_folder_take_only_the_marked_runs(tmp_path):
    base = tmp_path / "home"
    (base / "Documents").mkdir(parents=True)
    (base / "Documents" / "cv.txt").write_text("mine")
    (base / "projects").mkdir()
    outside = tmp_path / "outside"
    (outside / "data").mkdir(parents=True)
    (outside / ".cvs-run").write_text(RunMarker("linked-run", "alice", "h", 1).to_json())
    (base / "linked-run").symlink_to(outside)
    forged = base / "20261203-101500-dead"
    forged.mkdir()
    (forged / ".cvs-run").write_text(RunMarker("20261203-101500-beef", "alice", "h", 1).to_json())
    marked = [base / RUN, base / "20261203-101600-cd34"]
    for folder in marked:
        assert bash(nodedir.create_folder_command(str(folder), RunMarker(folder.name, "alice", "h", 1))).returncode == 0
        (folder / "smoke").mkdir()
        (folder / "smoke" / "node0.sh").write_text("true\n")

    res = bash(nodedir.scan_folders_command(str(base)))
    assert res.returncode == 0, res.stderr
    verdicts = {e.name: folder_verdict(e, owner="alice") for e in parse_scan(res.stdout)}
    assert {n for n, v in verdicts.items() if v.remove} == {f.name for f in marked}
    assert set(verdicts) == {"Documents", "projects", "linked-run", forged.name, *(f.name for f in marked)}

    res = bash(nodedir.remove_runs_command(str(base), [f.name for f in marked] + [forged.name, "linked-run"]))
    assert res.returncode == 0, res.stderr  # the node re-checks: the forged and linked ones are kept
    assert "kept" in res.stderr
    assert sorted(p.name for p in base.iterdir()) == sorted(["Documents", "projects", "linked-run", forged.name])
    assert (outside / "data").is_dir() and (base / "Documents" / "cv.txt").read_text() == "mine"


def test_a_name_with_a_newline_cannot_forge_a_scan_row(tmp_path):
    base = tmp_path / "s"
    base.mkdir()
    (base / f"x\n{RUN}\tdir\tmine\tfile\t{{}}").mkdir()
    rows = parse_scan(bash(nodedir.scan_folders_command(str(base))).stdout)
    assert len(rows) == 1 and rows[0].kind == "badname" and "\n" not in rows[0].name


def test_a_scan_of_a_missing_folder_is_empty(tmp_path):
    res = bash(nodedir.scan_folders_command(str(tmp_path / "nope")))
    assert res.returncode == 0 and res.stdout == ""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a folder another user owns")
def test_a_folder_another_user_owns_is_kept_without_all_owners(tmp_path):
    base = tmp_path / "s"
    folder = base / RUN
    assert bash(nodedir.create_folder_command(str(folder), RunMarker(RUN, "alice", "h", 1))).returncode == 0
    os.chown(folder, 65534, 65534)
    row = parse_scan(bash(nodedir.scan_folders_command(str(base))).stdout)[0]
    assert not row.mine and not folder_verdict(row, owner="alice").remove
    assert folder_verdict(row, owner=None).remove


def test_the_removal_command_names_each_run_with_the_text_its_marker_must_hold():
    cmd = nodedir.remove_runs_command("/s dir", [RUN, "20261203-101600-cd34"])
    assert f"cvs_rm_run '/s dir' {RUN} '\"run_id\": \"{RUN}\"' || cvs_bad=1" in cmd
    assert cmd.count("cvs_rm_run '/s dir' ") == 2 and cmd.endswith('[ -z "$cvs_bad" ]')
    assert "rm -rf -- \"$d\"" in cmd and "[ ! -L \"$d\" ]" in cmd and "[ ! -L \"$m\" ]" in cmd


def test_a_failed_removal_fails_the_command(tmp_path):
    base = tmp_path / "s"
    folder = base / RUN
    assert bash(nodedir.create_folder_command(str(folder), MARK)).returncode == 0
    res = bash(f"rm() {{ return 1; }}; {nodedir.remove_runs_command(str(base), [RUN])}")  # rm refused
    assert res.returncode != 0 and folder.is_dir()
