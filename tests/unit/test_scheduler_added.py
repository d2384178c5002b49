"""A new scheduler is one module and a registration line: this one declares a throw-away scheduler,
registers it, and runs the whole lifecycle through it on the host runtime on this machine, to a
PASS with the report written, then a dry run and ``invoke cleanup`` through it.

``LocalQueue`` hands out nodes that are this machine (as a queue would hand out an allocation:
the cluster file names only how many) and starts each job as a local process per node, which it
ends itself once the watch is over. It counts every call, so the test sees the lifecycle ask it,
and nothing else in the tree names it: the cluster file picks it by ``scheduler.name``.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from cvs_tasks import schedulers
from cvs_tasks.config import HostSpec, load_cluster
from cvs_tasks.config.errors import ConfigError
from cvs_tasks.jobs.shell import attached_start
from cvs_tasks.lifecycle.flow import run_all
from cvs_tasks.lifecycle.leftovers import clean_hosts, cleanup
from cvs_tasks.plan import with_hosts
from cvs_tasks.remote.local import LocalHosts
from cvs_tasks.remote.results import Node
from cvs_tasks.schedulers import Scheduler
from tests.unit.lifecycle_fixtures import assert_passed_with_report, one_combo_demo, open_listened, registered

NAME = "localq"
ADDRESS = "127.0.0.1"


class LocalJob:
    """One local process per node running its attached launch; ended (bounded) once the watch is over."""

    def __init__(self, processes: list[subprocess.Popen]) -> None:
        self.processes = processes
        self.cause: str | None = None

    def finish(self, outcome) -> None:
        for process in self.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=15)
        codes = [p.returncode for p in self.processes]
        if outcome is not None and not outcome.ok and any(codes):
            self.cause = f"local process exit codes {codes}"


class LocalQueue(Scheduler):
    """Nodes that are this machine, handed out per run; jobs as local processes."""

    name = NAME
    label = "LocalQ"
    assigns_nodes = True

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.jobs: list[LocalJob] = []

    def _nodes(self, count: int) -> list[Node]:
        return [Node(f"localq-{i}", ADDRESS, rank=i) for i in range(count)]

    def acquire(self, session):
        self.calls["acquire"] += 1
        nodes = self._nodes(session.plan.nnodes)
        self.remember(session, {"job": f"localq-{session.run.run_id}", "nodes": [n.name for n in nodes]},
                      hosts=[n.name for n in nodes])
        session.plan = with_hosts(session.plan, [HostSpec(n.name, n.address) for n in nodes])
        session.say(f"LocalQ: job localq-{session.run.run_id} holds {', '.join(n.name for n in nodes)}")
        return LocalHosts(nodes)

    def hosts_for_teardown(self, session):
        self.calls["hosts_for_teardown"] += 1
        return session.hosts() if self.recorded(session) else None

    def release(self, session):
        self.calls["release"] += 1
        recorded = self.recorded(session)
        if not recorded:
            return None
        self.remember(session, {**recorded, "released": True})
        return f"LocalQ job {recorded['job']} released"

    def launch(self, session, launch, output_dir: Path):
        self.calls["launch"] += 1
        runtime = session.runtime()
        processes = [subprocess.Popen(["bash", "-c", runtime.command(attached_start(n.launch_command, n.pid_path))],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True)
                     for n in launch.nodes]
        job = LocalJob(processes)
        self.jobs.append(job)
        return job

    def dry_run_lines(self, session):
        return [f"[dry-run] LocalQ: hand out {session.plan.nnodes} node(s)"]

    def dry_run_launch_lines(self, session, launch):
        return [f"[dry-run] LocalQ: {len(launch.nodes)} local process(es)"]

    def judge_nodes(self, session):
        self.calls["judge_nodes"] += 1
        return []

    def cleanup(self, cluster, where, *, dry_run, say):
        self.calls["cleanup"] += 1
        with LocalHosts(self._nodes(cluster.scheduler.nodes)) as hosts:
            return clean_hosts(hosts, where, dry_run=dry_run, say=say)

    def placeholders(self, cluster):
        return tuple(HostSpec(f"localq-slot{i}", f"localq-slot{i}") for i in range(cluster.scheduler.nodes))


@pytest.fixture
def localq():
    with registered(schedulers, LocalQueue()) as scheduler:
        yield scheduler


def files(tmp_path: Path) -> tuple[Path, Path]:
    """The demo config (one combo, everything under ``tmp_path``) and a cluster file naming the queue."""
    config, _ = one_combo_demo(tmp_path, "demo_single.json")
    cluster = tmp_path / "cluster-localq.json"
    cluster.write_text(json.dumps({"scheduler": {"name": NAME, "nodes": 1, "container": "none"}}))
    return config, cluster


def test_the_cluster_file_names_the_new_scheduler_and_only_registered_names_load(localq, tmp_path):
    _, cluster = files(tmp_path)
    assert schedulers.for_cluster(load_cluster(cluster)) is localq
    assert NAME in schedulers.block_names() and schedulers.STATIC not in schedulers.block_names()
    schedulers.unregister(NAME)
    with pytest.raises(ConfigError, match="scheduler.name"):
        load_cluster(cluster)
    schedulers.register(localq)


def test_a_new_scheduler_is_one_module_and_runs_the_whole_lifecycle(localq, tmp_path):
    config, cluster = files(tmp_path)
    session, said = open_listened(config, cluster, tmp_path)
    try:
        assert session.scheduler is localq and session.plan.hosts[0].name == "localq-slot0"  # not handed out yet
        code = run_all(session)
    finally:
        session.close()
    run = session.run
    assert_passed_with_report(session, code)

    # the lifecycle asked the scheduler for everything: nodes once, a launch per job, teardown, release, judging
    assert localq.calls == Counter(acquire=1, launch=2, hosts_for_teardown=1, release=1, judge_nodes=1)
    assert all(p.returncode == 0 for job in localq.jobs for p in job.processes)  # each job ended on its own
    manifest = json.loads((run.path / "run.json").read_text())
    assert manifest["hosts"] == ["localq-0"]
    assert manifest[NAME] == {"job": f"localq-{run.run_id}", "nodes": ["localq-0"], "released": True}
    assert f"LocalQ: job localq-{run.run_id} holds localq-0" in said
    teardown = run.read_record("teardown")
    assert teardown.status == "PASS" and f"LocalQ job localq-{run.run_id} released" in teardown.data["notes"]
    training = run.read_record("training", session.plan.combo_ids[0])
    assert training.status == "PASS" and training.data["metrics"]["training.throughput_per_gpu"] > 0


def test_a_dry_run_and_cleanup_go_through_the_new_scheduler(localq, tmp_path):
    config, cluster = files(tmp_path)
    session, said = open_listened(config, cluster, tmp_path, dry_run=True)
    try:
        assert run_all(session) == 0
    finally:
        session.close()
    assert "[dry-run] LocalQ: hand out 1 node(s)" in said
    assert said.count("[dry-run] LocalQ: 1 local process(es)") == 2  # smoke and the combo
    assert localq.calls["acquire"] == localq.calls["launch"] == 0  # a dry run asks it nothing of the nodes

    lines: list[str] = []
    outcome = cleanup(str(cluster), config=str(config), run="20990101-000000-abcd", dry_run=True, say=lines.append)
    assert localq.calls["cleanup"] == 1 and outcome.ok
    assert lines == ["no leftovers found for run 20990101-000000-abcd"]
