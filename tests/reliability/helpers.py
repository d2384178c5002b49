"""Shared helpers of the reliability suite (imported by its tests and its conftest): fault configs on the shared
testbed, a running `invoke`, a spy that timestamps the fault line on the node's disk, and the "nothing left,
nothing lost" checks.

Every scenario gets its own container name, node folders (under the testbed's shared dir),
MASTER_PORT and a marker env var, so it never collides with other runs on the shared testbed and
its leftovers (processes, containers, folders) can be found exactly.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from testbed import docker_api
from tests.e2e.conftest import REPO, InvokeResult, edited_config

CONFIGS = REPO / "configs" / "testbed"
FIGURES = Path(os.environ.get("CVS_RELIABILITY_FIGURES", "/tmp/cvs-reliability-figures.json"))
measured: dict[str, dict] = {}


# --- scenario configs ----------------------------------------------------------------------------
@dataclass
class Scenario:
    """One fault scenario's files and the names that identify what it leaves behind."""

    config: Path
    cluster: Path
    marker: str
    node_root: Path
    container: str
    combos: list[str]
    poll_interval_s: float
    tmp: Path

    @property
    def log_dir(self) -> Path:
        return self.node_root / "logs"

    @property
    def scripts_dir(self) -> Path:
        return self.node_root / "scripts"

    def flags(self) -> list[str]:
        return ["--config", str(self.config), "--cluster", str(self.cluster)]


def make_scenario(tmp_path: Path, cluster: Path, *, base: str = "sim_megatron_single.json", env: dict | None = None,
                  iterations: int = 10, stall_timeout_s: float = 3.0, edit=None,
                  shared: Path | None = None) -> Scenario:
    """A testbed config: smoke off, both combos with ``iterations`` steps, fast polling, unique names."""
    marker = uuid.uuid4().hex[:10]
    shared = shared or Path("/tmp/cvs-testbed/shared")
    node_root = shared / "reliability" / marker
    container = f"cvs_rel_{marker}"
    poll = 0.5

    def change(cfg):
        cfg["smoke"]["enabled"] = False
        cfg["paths"]["log_dir"] = str(node_root / "logs")
        cfg["paths"]["scripts_dir"] = str(node_root / "scripts")
        cfg["container"]["name"] = container
        cfg["container"]["env"].update({
            "MASTER_PORT": str(random.randint(20000, 29999)),
            "SIM_NCCL_TIMEOUT_S": "3",
            "CVS_REL_MARKER": marker,
        })
        cfg["container"]["env"].update(env or {})
        cfg["train_params"]["training_iterations"] = str(iterations)
        for body in cfg["sweep"]["combinations"].values():
            body["training_iterations"] = str(iterations)
        cfg["loss_curve"]["milestone_steps"] = [max(2, iterations // 2), iterations]
        cfg["convergence"]["target_value"] = 0.0  # 5-10 steps end above any useful target; judged in e2e
        cfg["watch"].update(poll_interval_s=poll, stall_timeout_s=stall_timeout_s, startup_timeout_s=60)
        if edit is not None:
            edit(cfg)

    config = edited_config(CONFIGS / base, tmp_path, change)
    combos = json.loads(config.read_text())["sweep"]["runs"]
    return Scenario(config, cluster, marker, node_root, container, combos, poll, tmp_path)


def set_fault(env: dict, fault: str, precision: str) -> dict:
    """SIM_FAULT limited to one combo's precision, so the other combo is measured before it."""
    return {**env, "SIM_FAULT": fault, "SIM_FAULT_PRECISION": precision}


def precision_of(combo: str) -> str:
    return combo.split("PRECISION=")[1]


# --- running invoke ------------------------------------------------------------------------------
class RunningInvoke:
    """`python -m invoke ...` in the background, so a test can act on it mid-run."""

    def __init__(self, *args: str, reports: Path, env: dict | None = None):
        full_env = dict(os.environ, CVS_REPORTS_DIR=str(reports), COLUMNS="160")
        full_env.update(env or {})
        self.reports = reports
        self.started = time.time()
        self.proc = subprocess.Popen([sys.executable, "-m", "invoke", *args], cwd=REPO, env=full_env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def signal(self, sig: int) -> float:
        self.proc.send_signal(sig)
        return time.time()

    def wait(self, timeout: float = 300) -> InvokeResult:
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate(timeout=30)
            pytest.fail(f"invoke did not finish within {timeout:.0f}s (the harness hung):\n"
                        f"{out[-3000:]}\n{err[-3000:]}")
        return InvokeResult(self.proc.returncode, out, err, self.reports)

    def __enter__(self) -> "RunningInvoke":
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=30)


def invoke(*args: str, reports: Path, timeout: float = 300, env: dict | None = None) -> InvokeResult:
    with RunningInvoke(*args, reports=reports, env=env) as run:
        return run.wait(timeout)


class LogSpy(threading.Thread):
    """Timestamps the first appearance of ``pattern`` in any node log under ``root`` (polled at 20 Hz)."""

    def __init__(self, root: Path, pattern: str, glob: str = "**/training.log"):
        super().__init__(daemon=True)
        self.root, self.pattern, self.glob = root, re.compile(pattern), glob
        self.seen_at: float | None = None
        self.seen_in: Path | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        deadline = time.monotonic() + 600
        while not self._halt.is_set() and time.monotonic() < deadline:
            for path in self._candidates():
                try:
                    text = path.read_text(errors="replace")
                except OSError:
                    continue
                if self.pattern.search(text):
                    self.seen_at, self.seen_in = time.time(), path
                    return
            self._halt.wait(0.05)

    def _candidates(self) -> list[Path]:
        """The logs under ``root`` now; a folder that vanishes mid-walk (a lock's temp dir) means try again."""
        try:
            return list(self.root.glob(self.glob)) if self.root.exists() else []
        except OSError:
            return []

    def wait_seen(self, timeout: float) -> float:
        self.join(timeout)
        assert self.seen_at is not None, f"{self.pattern.pattern!r} never appeared under {self.root}"
        return self.seen_at

    def stop(self) -> None:
        self._halt.set()


def spy(root: Path, pattern: str, glob: str = "**/training.log") -> LogSpy:
    s = LogSpy(root, pattern, glob)
    s.start()
    return s


def logs_contain(root: Path, text: str, glob: str = "**/training.log") -> bool:
    """True once any log under ``root`` holds ``text``; files and folders may come and go meanwhile."""
    try:
        paths = list(root.glob(glob)) if root.exists() else []
    except OSError:
        return False
    for path in paths:
        try:
            if text in path.read_text(errors="replace"):
                return True
        except OSError:
            continue
    return False


def wait_until(check, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")


# --- what must hold after every fault ------------------------------------------------------------
def read_json(path: Path):
    return json.loads(path.read_text())


def assert_run_dir_readable(run: Path, *, rendered: bool = True) -> dict:
    """Manifest, every stage record, results.json, HTML and JUnit exist and parse; returns results."""
    manifest = read_json(run / "run.json")
    assert manifest["run_id"] == run.name
    for rec in sorted((run / "stages").glob("*.json")):
        data = read_json(rec)
        assert data["status"] in ("PASS", "FAIL", "ERROR", "SKIPPED"), rec
        assert data["ended"] >= data["started"] > 0, rec
    if not rendered:
        return {}
    assert "finished" in manifest, "the manifest was not stamped: the run did not finish cleanly"
    results = read_json(run / "results.json")
    ET.parse(run / "junit.xml")
    for page in ("report.html", "metrics.html"):
        text = (run / page).read_text()
        assert "</html>" in text, f"{page} is truncated"
    return results


def containers_of(testbed, *, run_id: str | None = None, name: str | None = None) -> list[str]:
    """Containers of this run (by label) or with this name, on every testbed daemon."""
    label = f"cvs.run_id={run_id}" if run_id else None
    return [f"{node.address}:{found}" for node in testbed.nodes
            for found in docker_api.container_names(node.docker_host, label=label, name=name)]


def marked_processes(marker: str, path_hint: str) -> list[str]:
    """Processes whose environment carries the scenario marker or whose command line names its folders."""
    hits = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"CVS_REL_MARKER={marker}".encode() in environ or (path_hint and path_hint in cmd):
            hits.append(f"{entry.name}: {cmd[:200]}")
    return hits


def assert_nothing_left(testbed, scenario: Scenario, run_id: str | None, timeout: float = 15.0) -> None:
    """No container, no job process and no per-run node folder of this scenario on any node."""
    def clean():
        return not (containers_of(testbed, name=scenario.container)
                    or (run_id and containers_of(testbed, run_id=run_id))
                    or marked_processes(scenario.marker, str(scenario.node_root)))

    deadline = time.monotonic() + timeout
    while not clean() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert containers_of(testbed, name=scenario.container) == []
    if run_id:
        assert containers_of(testbed, run_id=run_id) == []
    assert marked_processes(scenario.marker, str(scenario.node_root)) == []
    if run_id:
        assert not (scenario.scripts_dir / run_id).exists(), "the per-run node folder (HF token) was left"


def no_traceback(res: InvokeResult) -> None:
    assert "Traceback (most recent call last)" not in res.err + res.out, res.err[-4000:]


def record(res: InvokeResult, stage: str, combo: str | None = None) -> dict:
    return res.record(stage, combo)


def kept_first_combo(res: InvokeResult, combo: str, gated: bool = True) -> None:
    """The combo measured before the fault is recorded with its metrics (and gate rows when ``gated``)."""
    trained = res.record("training", combo)
    assert trained["status"] == "PASS", trained["reason"]
    assert trained["data"]["metrics"]["training.throughput_per_gpu"] > 0
    assert trained["data"]["steps"], "the measured iterations were lost"
    if not gated:
        return
    assert res.record("metric", combo)["status"] == "PASS"
    assert any(t["name"] == f"test_training[{combo}]" and t["status"] == "PASS" for t in res.results()["tests"])


# A time-to-detection bound is the waits the harness makes on purpose (poll intervals, the stall
# timeout, retry back-off, the job stop's 1 s check) plus a budget per SSH (+ docker exec) round
# trip. Quiet, a round trip takes 0.1-0.3 s. On a 2-core machine with two busy loops beside the
# suite and other suites running (load average 10), whole intervals measured up to about 1.2 s per
# round trip: 5.3 s from a fault line to its record, 12.7 s for an unreachable node's 9 s of back-off.
# 3 s per round trip holds there with 2.5 times to spare.
ROUND_TRIP_S = 3.0
STOP_CHECK_S = 1.0  # the job stop looks once a second whether the TERMed group is gone


def detection_bound(waits_s: float, round_trips: int) -> float:
    """The deliberate waits plus the round-trip budget: a bound that holds on a loaded machine."""
    return waits_s + round_trips * ROUND_TRIP_S


def note_detection(fault: str, seconds: float, bound: float, what: str = "") -> None:
    """Remember a measured time to detection (printed at the end, written to FIGURES)."""
    measured[fault] = {"detection_s": round(seconds, 2), "bound_s": bound, "from": what}
    assert 0 <= seconds <= bound, f"{fault}: detected after {seconds:.2f}s (bound {bound}s)"


def scenario_for(tmp_path, cluster, node_roots, **kw) -> Scenario:
    sc = make_scenario(tmp_path, cluster, **kw)
    node_roots.append(sc.node_root)
    return sc
