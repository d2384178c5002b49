"""A new backend is one module: this one declares a throw-away backend, registers it, and runs the
whole lifecycle with it on the host runtime on this machine, to a PASS with the report written.

``ToyBench`` claims its own image name and launches the simulated trainer's llama3 entry point
directly (no launcher script, no YAML). Nothing else in the tree names it: the config picks it by
its image, the lifecycle asks it for its launch, its tokenizer, NIC, checkpoint and memory
policies, its contracts and reference numbers, and the manifest and report show its label.
"""

from __future__ import annotations

import json

import pytest

from cvs_tasks import backends, runtimes
from cvs_tasks.backends import Backend
from cvs_tasks.jobs import layout
from cvs_tasks.jobs.shell import comment, detached_start, env_export_lines, finish_function, q
from cvs_tasks.jobs.spec import JobSpec, LaunchPlan, NodeLaunch
from cvs_tasks.lifecycle.flow import run_all
from cvs_tasks.run.records import combo_dir
from tests.unit.lifecycle_fixtures import (
    LOCAL,
    ROOT,
    assert_passed_with_report,
    one_combo_demo,
    open_listened,
    registered,
)

WORKSPACE = ROOT / "testbed" / "trainer" / "workspace"
IMAGE = "cvs-testbed/toybench:latest"
BANNER = "toybench wrapper:"


class ToyBench(Backend):
    """The simulated trainer's Megatron-LM llama3 entry point, started by a wrapper of its own."""

    name = "toybench"
    label = "ToyBench"
    dialect = "megatron"  # the simulated trainer prints Megatron-LM's lines

    def __init__(self) -> None:
        self.built: list[str] = []  # the labels of the jobs it built

    def matches(self, image: str) -> bool:
        return image.startswith("cvs-testbed/toybench")

    def build_launch(self, job: JobSpec, experiment: str | None) -> LaunchPlan:
        self.built.append(job.label)
        nodes = []
        for rank in range(job.nnodes):
            log = layout.node_log_path(job, rank)
            paths = layout.exit_path(job, rank), layout.pid_path(job, rank)
            nodes.append(NodeLaunch(rank, layout.script_path(job, rank), self.wrapper(job, rank),
                                    detached_start(layout.script_path(job, rank), layout.node_dir(job, rank), log,
                                                   *paths),
                                    log, *paths, console_path=log))
        return LaunchPlan(job.backend, job.label, layout.combo_log_dir(job), layout.prepare_commands(job), nodes)

    def wrapper(self, job: JobSpec, rank: int) -> str:
        lines = ["#!/bin/bash", comment(f"toybench job {job.label}, node {rank}"), "set -u",
                 *finish_function(layout.exit_path(job, rank)), f"echo {q(f'{BANNER} {job.label}')}"]
        if runtimes.get(job.runtime).wrapper_exports_env:
            lines += env_export_lines(job.env)[0]
        sizes = {"MBS": job.mbs, "BS": job.gbs, "TP": job.param("tensor_parallelism"),
                 "PP": job.param("pipeline_parallelism"), "SEQ_LENGTH": job.param("sequence_length"),
                 "MODEL_SIZE": job.param("model_size"), "TOTAL_ITERS": str(job.iterations),
                 "TE_FP8": "1" if job.precision.upper() == "FP8" else "0", "NODE_RANK": str(rank)}
        lines += [f"export LOG_DIR={q(layout.node_dir(job, rank))} EXP_NAME=toybench",
                  " ".join(f"{k}={q(v)}" for k, v in sizes.items())
                  + f" PYTHONPATH={q(WORKSPACE)} python3 -m simtrainer megatron llama3",
                  'cvs_finish "$?"']
        return "\n".join(lines) + "\n"


@pytest.fixture
def toybench():
    with registered(backends, ToyBench()) as backend:
        yield backend


def test_the_image_picks_the_new_backend_and_nothing_else_changes(toybench):
    assert backends.backend_for_image(IMAGE) is toybench
    assert backends.backend_for_image("rocm/megatron-lm:v25.9").name == backends.fallback().name
    assert backends.get("toybench") is toybench and "toybench" in backends.names()


def test_a_new_backend_is_one_module_and_runs_the_whole_lifecycle(toybench, tmp_path):
    config, combo = one_combo_demo(tmp_path, "toybench_single.json", image=IMAGE)
    session, _ = open_listened(config, LOCAL, tmp_path)
    try:
        assert session.plan.backend == "toybench"
        code = run_all(session)
    finally:
        session.close()
    run = session.run
    results = assert_passed_with_report(session, code)
    assert results["backend"] == "ToyBench" and json.loads((run.path / "run.json").read_text())["backend"] == "ToyBench"
    assert "ToyBench" in (run.path / "report.html").read_text()

    assert toybench.built == ["smoke", combo]  # its own launch, for every job
    node_logs = tmp_path / "nodes" / run.run_id / "logs"
    # the node's log folder is named for the backend
    assert (node_logs / "toybench-logs" / combo_dir(combo) / "out-node0" / "training.log").is_file()
    pulled = run.node_log_path("training", combo, 0).read_text()
    assert f"{BANNER} {combo}" in pulled  # its wrapper ran

    tokenizer = run.read_record("download_tokenizer")
    assert (tokenizer.status, tokenizer.reason) == ("SKIPPED", "ToyBench takes the tokenizer by its HF repo id")
    checkpoint = run.read_record("checkpoint")
    assert checkpoint.status == "SKIPPED"
    training = run.read_record("training", combo)
    assert training.status == "PASS" and training.data["metrics"]["training.throughput_per_gpu"] > 0
    assert training.data["reference_metrics"] == {}  # it declares no reference aggregation
    metric = run.read_record("metric", combo)
    assert metric.status == "PASS"
    names = [row.name for row in metric.metrics]
    assert "training.throughput_per_gpu" in names and not any(n.endswith("(ROCm CVS)") for n in names)
