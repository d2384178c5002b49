"""Slurm bookkeeping that needs no cluster: the salloc request from a cluster file, which nodes a
run blames, and the scheduler/runtime agreement checked at plan time."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from cvs_tasks.config.cluster import SchedulerSpec
from cvs_tasks.errors import BadInput
from cvs_tasks.lifecycle.slurm_nodes import judged_bad, request_of
from cvs_tasks.plan import check_scheduled_runtime
from cvs_tasks.run import NodeOutcome, StageRecord


def test_the_request_names_the_run_and_node_dict_becomes_the_nodelist():
    spec = SchedulerSpec(name="slurm", nodes=2, partition="mi300x", time="00:30:00", allocation_wait_s=90)
    req = request_of(spec, 2, [], "20261202-101010-ab12")
    assert (req.job_name, req.nodes, req.partition, req.time, req.wait_s, req.nodelist) == (
        "cvs-tasks-20261202-101010-ab12", 2, "mi300x", "00:30:00", 90, None)
    assert request_of(spec, 2, ["gpu01", "gpu07"], "r").nodelist == "gpu01,gpu07"


def test_only_the_root_cause_node_and_failed_launches_are_blamed():
    names = {"10.0.0.1": "gpu01", "10.0.0.2": "gpu02", "10.0.0.3": "gpu03"}
    oom = StageRecord("training", "FAIL", combo="MBS=4,GBS=128,PRECISION=FP8",
                      nodes=[NodeOutcome("10.0.0.1", 0, "FAIL", "NCCL watchdog timeout (echo)"),
                             NodeOutcome("10.0.0.2", 1, "FAIL", "HIP out of memory")],
                      data={"error": {"host": "10.0.0.2", "cls": "oom"}})
    launch = StageRecord("launch_container", "ERROR",
                         nodes=[NodeOutcome("gpu03", 2, "ERROR", "image not found"),
                                NodeOutcome("gpu01", 0, "PASS", "running")])
    passed = StageRecord("training", "PASS", combo="MBS=4,GBS=128,PRECISION=BF16",
                         data={"error": {"host": "10.0.0.1", "cls": "warning"}})
    assert judged_bad([oom, launch, passed], names) == {
        "gpu02": "test_training[MBS=4,GBS=128,PRECISION=FP8]: oom",
        "gpu03": "test_launch_container: image not found",
    }


def suite(runtime: str):
    return SimpleNamespace(config=SimpleNamespace(container=SimpleNamespace(runtime=SimpleNamespace(name=runtime))),
                           config_path=Path("site/x_distributed.json"))


def cluster(container: str):
    return SimpleNamespace(scheduler=SchedulerSpec(name="slurm", nodes=2, container=container),
                           path=Path("cluster.json"))


def test_scheduler_container_and_suite_runtime_must_agree():
    check_scheduled_runtime(suite("docker"), cluster("docker"))
    check_scheduled_runtime(suite("host"), cluster("none"))
    with pytest.raises(BadInput, match="scheduler.container is 'none' but site/x_distributed.json runs "
                                       "container.runtime.name 'docker'"):
        check_scheduled_runtime(suite("docker"), cluster("none"))


def test_the_allocation_decides_the_hosts_and_master_addr():
    from cvs_tasks.config import HostSpec
    from cvs_tasks.plan import RunPlan, with_hosts

    plan = RunPlan(suite=None, cluster=None, mode="distributed",
                   hosts=(HostSpec("slurm-node0", "slurm-node0"), HostSpec("slurm-node1", "slurm-node1")),
                   env={"MASTER_ADDR": "10.9.9.9", "NNODES": "2", "NCCL_DEBUG": "WARN"})
    bound = with_hosts(plan, [HostSpec("gpu07", "10.1.0.7"), HostSpec("gpu09", "10.1.0.9")])
    assert [h.name for h in bound.hosts] == ["gpu07", "gpu09"]
    assert bound.env == {"MASTER_ADDR": "10.1.0.7", "NNODES": "2", "NCCL_DEBUG": "WARN"}
    with pytest.raises(BadInput, match="the allocation has 1 node"):
        with_hosts(plan, [HostSpec("gpu07", "10.1.0.7")])


def test_the_containers_env_takes_the_allocations_master_addr():
    from cvs_tasks.remote.docker_cmd import container_spec, with_env

    spec = container_spec({"name": "c", "image": "i", "env": {"MASTER_ADDR": "10.9.9.9", "NCCL_DEBUG": "WARN"}})
    assert with_env(spec, {"MASTER_ADDR": "10.1.0.7"}).env == (("MASTER_ADDR", "10.1.0.7"), ("NCCL_DEBUG", "WARN"))
    assert with_env(container_spec({"name": "c", "image": "i"}), {"MASTER_ADDR": "10.1.0.7"}).env == (
        ("MASTER_ADDR", "10.1.0.7"),)
