"""The clean-up of killed runs: host-runtime job groups found through their pid files (and only
when the group still runs that wrapper, so a recycled pid is never signalled), node folders, and
`invoke cleanup` / `invoke teardown` after a SIGKILLed `host`-runtime run on this machine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

from cvs_tasks.jobs.nodedir import RunMarker, create_folder_command
from cvs_tasks.lifecycle.leftovers import (
    HostJob,
    host_jobs_command,
    owner_name,
    parse_host_jobs,
    scan_leftovers,
    stop_host_jobs_command,
    stop_run_host_jobs,
)
from cvs_tasks.remote import LocalHosts, Node
from tests.e2e.conftest import edited_config
from tests.reliability.helpers import (
    CONFIGS,
    REPO,
    RunningInvoke,
    invoke,
    logs_contain,
    marked_processes,
    wait_until,
)


def test_parse_host_jobs_keeps_well_formed_rows_only():
    out = "r1\tMBS_1\t0\t4242\talive\ngarbage\nr1\tMBS_1\tx\t1\talive\nr2\tsmoke\t1\t77\tgone\n"
    assert parse_host_jobs("n0", 0, out) == [HostJob("n0", 0, "r1", "MBS_1", 0, 4242, "alive"),
                                             HostJob("n0", 0, "r2", "smoke", 1, 77, "gone")]


def test_stop_command_targets_alive_jobs_only_and_quotes_paths():
    jobs = [HostJob("n0", 0, "r1", "a b", 0, 4242, "alive"), HostJob("n0", 0, "r1", "c", 0, 99, "gone"),
            HostJob("n0", 0, "r1", "d", 0, 1, "alive")]
    cmd = stop_host_jobs_command("/s dir", jobs)
    assert "cvs_stop 4242 '/s dir/r1/a b/node0.sh'" in cmd
    assert "cvs_stop 99" not in cmd and "cvs_stop 1 " not in cmd
    assert stop_host_jobs_command("/s", []) == "true"


def start_wrapper(scripts: Path, run_id: str, label: str) -> int:
    """A stand-in for the job wrapper, started the way the harness does (own session, pid file)."""
    marker = RunMarker(run_id, owner_name(), "h", 1)  # the run folder as the harness makes it
    subprocess.run(["bash", "-c", create_folder_command(str(scripts / run_id), marker)], check=True)
    folder = scripts / run_id / label
    folder.mkdir(parents=True)
    script = folder / "node0.sh"
    script.write_text("sleep 300 & wait\n")
    proc = subprocess.Popen(["setsid", "bash", str(script)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (folder / "node0.pid").write_text(f"{proc.pid}\n")
    return proc.pid


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_live_wrapper_is_found_stopped_and_a_recycled_pid_is_left_alone(tmp_path):
    scripts = tmp_path / "scripts"
    pid = start_wrapper(scripts, "run1", "MBS_1")
    stranger = subprocess.Popen(["setsid", "sleep", "300"])  # a pid file pointing at someone else's group
    other = scripts / "run1" / "MBS_2"
    other.mkdir()
    (other / "node0.pid").write_text(f"{stranger.pid}\n")
    unmarked = scripts / "run2" / "MBS_1"  # a folder the harness cannot prove it made: its jobs are not touched
    unmarked.mkdir(parents=True)
    (unmarked / "node0.pid").write_text(f"{stranger.pid}\n")
    hosts = LocalHosts([Node("local", "localhost", 22, 0)])
    try:
        wait_until(lambda: alive(pid), 10, "the wrapper")
        found = scan_leftovers(hosts, runtime="host", scripts_dir=str(scripts), owner=None)
        states = {(j.label, j.state) for j in found.jobs}
        assert states == {("MBS_1", "alive"), ("MBS_2", "unverified")}, found
        assert [f.path for f in found.folders] == [str(scripts / "run1")]
        assert [(f.path, f.reason) for f in found.kept] == [(str(scripts / "run2"),
                                                             "no .cvs-run marker: not made by cvs-tasks")]
        notes = stop_run_host_jobs(hosts, str(scripts), "run1")
        assert len(notes) == 1 and "MBS_1" in notes[0]
        wait_until(lambda: not alive(pid), 15, "the wrapper to be stopped")
        assert alive(stranger.pid), "a group that does not run our wrapper was signalled"
    finally:
        stranger.kill()
        stranger.wait(10)
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert host_jobs_command(str(scripts), "run1").endswith("; true")


@pytest.mark.testbed  # the slow tier: a whole lifecycle run on the host runtime, killed mid-training
@pytest.mark.parametrize("cleaner", ["cleanup", "teardown"])
def test_sigkilled_host_runtime_run_is_cleaned_up(cleaner, tmp_path, reports):
    marker = uuid.uuid4().hex[:10]
    node = tmp_path / "node"

    def edit(cfg):
        cfg["paths"].update(log_dir=str(node / "logs"), scripts_dir=str(node / "scripts"))
        cfg["container"]["env"].update(MASTER_PORT=str(30000 + int(marker[:4], 16) % 5000), SIM_TIME_SCALE="0.5",
                                       CVS_REL_MARKER=marker)
        cfg["smoke"]["enabled"] = False

    config = edited_config(CONFIGS / "demo_host.json", tmp_path, edit)
    flags = ["--config", str(config), "--cluster", str(REPO / "cluster" / "localhost.json")]
    with RunningInvoke("all", *flags, reports=reports) as run:
        wait_until(lambda: logs_contain(node / "logs", "iteration        2/"), 120, "training to start")
        run.signal(signal.SIGKILL)
        res = run.wait(30)
    run_id = res.run_dir.name
    assert marked_processes(marker, str(node)), "nothing was left running: the test proves nothing"
    if cleaner == "cleanup":
        listed = invoke("cleanup", *flags[2:], "--config", str(config), "--run", run_id, "--dry-run", reports=reports)
        assert listed.code == 0 and f"job {run_id}/" in listed.out, listed.out + listed.err
        done = invoke("cleanup", *flags[2:], "--config", str(config), "--run", run_id, reports=reports)
    else:
        done = invoke("teardown", reports=reports)
        notes = json.loads((res.run_dir / "stages" / "teardown.json").read_text())["data"]["notes"]
        assert any("stopped leftover job" in n for n in notes), notes
    assert done.code == 0, done.out + done.err
    wait_until(lambda: not marked_processes(marker, str(node)), 20, "the job processes to be gone")
    assert not (node / "scripts" / run_id).exists()
    assert not (node / "logs" / ".cvs-lock").exists()  # the killed run's log-folder lock: released or stale-cleared
