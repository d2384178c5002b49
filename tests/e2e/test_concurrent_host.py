"""Two runs at once on one machine (issue #29, item 8), through the real CLI and the `host` runtime.

With a fixed log folder the second run is refused at launch, naming the first, and the first passes
with its logs intact. With the demo config as shipped (per-run node paths) both pass side by side.
The second run starts once the first provably holds its node folder: the lock (or run folder
marker) has appeared on disk; while the second runs, the first is stopped (SIGSTOP), so the
outcome never depends on which of them is faster.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.conftest import REPO, InvokeResult, edited_config

DEMO = REPO / "configs" / "testbed" / "demo_host.json"
LOCAL = REPO / "cluster" / "localhost.json"


class Background:
    """`invoke all` in the background, its output in files (a stopped reader never blocks it)."""

    def __init__(self, config: Path, reports: Path, cluster: Path = LOCAL):
        reports.mkdir(parents=True, exist_ok=True)
        self.reports = reports
        self.out, self.err = reports.parent / f"{reports.name}.out", reports.parent / f"{reports.name}.err"
        env = dict(os.environ, CVS_REPORTS_DIR=str(reports), COLUMNS="160")
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "invoke", "all", "--config", str(config),
                                          "--cluster", str(cluster)], cwd=REPO, env=env, stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL)

    def wait_for_file(self, pattern: str, timeout: float = 120, known: frozenset[Path] = frozenset()) -> Path:
        """The first file matching ``pattern`` (a glob from /), not in ``known``, once it exists and is not empty."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [p for p in Path("/").glob(pattern.lstrip("/"))
                     if p not in known and p.is_file() and p.stat().st_size]
            if found:
                return found[0]
            assert self.proc.poll() is None, f"the first run ended before holding its folder:\n{self.text()}"
            time.sleep(0.05)
        raise AssertionError(f"{pattern} did not appear within {timeout}s:\n{self.text()}")

    def text(self) -> str:
        return self.out.read_text()[-3000:] + self.err.read_text()[-3000:]

    def wait(self, timeout: float = 600) -> InvokeResult:
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=30)
        return InvokeResult(self.proc.returncode, self.out.read_text(), self.err.read_text(), self.reports)


def training_logs_complete(res: InvokeResult) -> None:
    """Every combo trained to its last step and its node log reads from step 1 on, with no repeats."""
    for combo in json.loads(DEMO.read_text())["sweep"]["runs"]:
        record = res.record("training", combo)
        assert record["status"] == "PASS", record
        steps = [int(line.split("iteration")[1].split("/")[0]) for line in
                 (res.run_dir / record["nodes"][0]["log"]).read_text().splitlines() if " iteration " in line]
        assert steps == list(range(1, steps[-1] + 1)) and steps[-1] == 20, steps


def test_a_second_run_on_the_same_fixed_log_folder_is_refused_naming_the_first(tmp_path):
    node = tmp_path / "node"

    def fixed(cfg):
        cfg["paths"].update(log_dir=str(node / "logs"), scripts_dir=str(node / "scripts"))

    config = edited_config(DEMO, tmp_path, fixed)
    first = Background(config, tmp_path / "reports-a")
    try:
        holder = first.wait_for_file(f"{node}/logs/.cvs-lock/holder")
        first_run = json.loads(holder.read_text())["run_id"]
        first.proc.send_signal(signal.SIGSTOP)  # it holds the lock and cannot finish meanwhile
        try:
            second = Background(config, tmp_path / "reports-b").wait(timeout=300)
        finally:
            first.proc.send_signal(signal.SIGCONT)
        assert second.code == 3, second.out[-3000:] + second.err[-3000:]
        assert f"is in use by run {first_run}" in second.out, second.out[-3000:]
        assert second.record("launch_container")["status"] == "ERROR"
        assert json.loads(holder.read_text())["run_id"] == first_run  # the refused run left it alone
        done = first.wait()
    finally:
        if first.proc.poll() is None:
            os.kill(first.proc.pid, signal.SIGCONT)
            first.proc.kill()
    assert done.code == 0, done.out[-3000:] + done.err[-3000:]
    assert done.results()["verdict"] == "PASS"
    training_logs_complete(done)
    assert not (node / "logs" / ".cvs-lock").exists()  # released at teardown
    assert sorted(p.name for p in (node / "scripts").iterdir()) == []  # both run folders removed


def test_two_demo_runs_at_once_both_pass_with_their_own_node_folders(tmp_path):
    runs = Path(json.loads(DEMO.read_text())["paths"]["scripts_dir"])
    pattern = f"{runs}/*/logs/.cvs-lock/holder"
    before = frozenset(Path("/").glob(pattern.lstrip("/")))  # a killed run's leftovers are not ours
    first = Background(DEMO, tmp_path / "reports-a")
    try:
        first.wait_for_file(pattern, known=before)  # the first run holds its own node folder
        second = Background(DEMO, tmp_path / "reports-b")
        a, b = first.wait(), second.wait()
    finally:
        for run in (first, locals().get("second")):
            if run is not None and run.proc.poll() is None:
                run.proc.kill()
    for res in (a, b):
        assert res.code == 0, res.out[-3000:] + res.err[-3000:]
        assert res.results()["verdict"] == "PASS"
        training_logs_complete(res)
    assert a.run_dir.name != b.run_dir.name
    assert not (runs / a.run_dir.name).exists() and not (runs / b.run_dir.name).exists()  # both torn down
