"""A node's log follower killed mid-run on the host runtime: the run goes on, the log copy stays exact."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

from tests.e2e.conftest import REPO, edited_config, run_invoke

DEMO = REPO / "configs" / "testbed" / "demo_host.json"
LOCAL = REPO / "cluster" / "localhost.json"


class FollowerKiller:
    """Kills the follower of the first training log under ``root`` that holds ``after`` bytes, once."""

    def __init__(self, root: Path, combo_dir: str, after: int = 3000):
        self.root, self.combo_dir, self.after = root, combo_dir, after
        self.killed: tuple[int, Path] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while self.killed is None and not self._stop.wait(0.05):
            for log in self.root.rglob("training.log"):
                if self.combo_dir not in str(log) or log.stat().st_size < self.after:
                    continue
                found = subprocess.run(["pgrep", "-o", "-f", f"cvs-follow {log}"], capture_output=True, text=True)
                if found.stdout.split():
                    pid = int(found.stdout.split()[0])
                    os.kill(pid, signal.SIGKILL)  # the follower itself, on the node's side
                    self.killed = (pid, log)
                    return

    def __enter__(self) -> "FollowerKiller":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)


def test_killing_a_nodes_follower_mid_run_keeps_the_run_going_and_the_copy_identical(reports, tmp_path):
    combo = json.loads(DEMO.read_text())["sweep"]["runs"][0]
    node_logs = tmp_path / "node-logs"

    def edit(cfg):
        cfg["paths"]["log_dir"] = str(node_logs)
        cfg["container"]["env"]["SIM_STEP_MS"] = "8000"  # 0.4 s a step: time to kill it mid-run
        cfg.setdefault("watch", {})["poll_interval_s"] = 0.2

    config = edited_config(DEMO, tmp_path, edit)
    with FollowerKiller(node_logs, combo.replace("=", "_").replace(",", "_")) as killer:
        res = run_invoke("train", "--combo", combo, "--config", str(config), "--cluster", str(LOCAL), reports=reports)
    assert res.code == 0, res.out + res.err
    assert killer.killed is not None, "no follower was found to kill"
    record = res.record("training", combo)
    assert record["status"] == "PASS"
    assert any("log follower of node" in note and "restarted from byte" in note for note in record["data"]["notes"])
    copy = res.run_dir / record["nodes"][0]["log"]
    assert copy.read_bytes() == killer.killed[1].read_bytes()
