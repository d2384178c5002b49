"""Container runtimes against an in-memory Docker per node: lifetimes, rollback, retries."""

from __future__ import annotations

import pytest

from cvs_tasks.errors import BadInput
from cvs_tasks.remote import HostRuntime, RetryPolicy, runtime_for
from cvs_tasks.remote.leftovers import find_leftovers, remove_leftovers
from remote_fakes import FakeDockerHosts, err

IMAGE = "rocm/megatron-lm:v25.9"


def container(**over):
    block = {"name": "cvs-c", "image": IMAGE, "lifetime": "per_run",
             "runtime": {"name": "docker", "args": {"network": "host"}}, "env": {}}
    block.update(over)
    return block


def runtime(hosts, **over):
    return runtime_for(hosts, container(**over), run_id="run1", owner="alice", nnodes=len(hosts),
                       retry=RetryPolicy(attempts=3, first_delay=0))


@pytest.fixture
def hosts():
    fake = FakeDockerHosts(["n0", "n1"])
    for node in fake.state.values():
        node.images.add(IMAGE)
    return fake


DEFAULT_FLAGS = ("--ipc host --privileged --device /dev/kfd --device /dev/dri --device /dev/infiniband "
                 "--cap-add IPC_LOCK --cap-add SYS_PTRACE --security-opt seccomp=unconfined --group-add video "
                 "--ulimit memlock=-1")
RUN = ("docker run -d --name cvs-c --label cvs.run_id=run1 --label cvs.owner=alice "
       f"--label cvs.name=cvs-c --network host {DEFAULT_FLAGS} -e NNODES=2 rocm/megatron-lm:v25.9 sleep infinity")


def test_per_run_clears_leftovers_launches_and_verifies(hosts):
    hosts.state["n1"].containers["cvs-c"] = ("exited", {})
    rt = runtime(hosts)
    results = rt.launch()
    assert [(r.host, r.ok, r.stdout) for r in results] == [("n0", True, "cvs-c-id"), ("n1", True, "cvs-c-id")]
    assert hosts.commands("n0") == [
        "docker rm -f cvs-c", f"docker image inspect --format '{{{{.Id}}}}' {IMAGE}", RUN,
        "docker container inspect --format '{{.State.Status}}' cvs-c"]
    assert rt.mode == "launched" and rt.attempts == []
    assert hosts.state["n1"].containers["cvs-c"] == (
        "running", {"cvs.run_id": "run1", "cvs.owner": "alice", "cvs.name": "cvs-c"})
    assert rt.running() == [True, True]


def test_missing_image_is_loaded_from_the_tar_only_where_missing(hosts):
    hosts.state["n1"].images.clear()
    hosts.state["n1"].tars["/data/img.tar"] = IMAGE
    results = runtime(hosts, image_tar="/data/img.tar").launch()
    assert all(r.ok for r in results)
    assert "docker load -i /data/img.tar" in hosts.commands("n1")
    assert not any("load" in c for c in hosts.commands("n0"))


def test_pull_after_registry_login_is_retried_only_on_the_failing_node(hosts):
    for node in hosts.state.values():
        node.images.clear()
    hosts.state["n1"].fail["docker pull"] = [err(1, "net/http: TLS handshake timeout")]
    registry = {"username": "bot", "password_file": "/etc/cvs/pw", "server": "reg.example"}
    rt = runtime(hosts, runtime={"name": "docker", "args": {"registry": registry}})
    assert all(r.ok for r in rt.launch())
    login = "docker login --username bot --password-stdin reg.example < /etc/cvs/pw"
    assert hosts.commands("n0").count(f"docker pull {IMAGE}") == 1
    assert hosts.commands("n1").count(f"docker pull {IMAGE}") == 2
    assert login in hosts.commands("n0") and login in hosts.commands("n1")
    assert [(a.step, a.attempt, a.error) for a in rt.attempts] == [
        ("docker pull", 1, "node n1: exit status 1: net/http: TLS handshake timeout")]


def test_a_failed_run_on_one_node_removes_what_was_started(hosts):
    hosts.state["n1"].fail["docker run"] = [err(125, "docker: Error: unknown device /dev/kfd")]
    results = runtime(hosts).launch()
    assert [r.ok for r in results] == [False, False]
    assert results[1].error == "node n1: docker run: exit status 125: docker: Error: unknown device /dev/kfd"
    assert results[0].error == "node n0: removed again: the launch failed on n1"
    assert hosts.commands("n0")[-1] == "docker rm -f cvs-c"
    assert hosts.state["n0"].containers == {}


def test_a_container_that_exits_at_once_fails_verification(hosts):
    hosts.state["n0"].exit_after_start = True
    results = runtime(hosts).launch()
    assert results[0].error == "node n0: container is exited right after docker run (see `docker logs cvs-c`)"
    assert hosts.state["n0"].containers == {} and hosts.state["n1"].containers == {}


def test_persistent_attaches_when_running_everywhere(hosts):
    for node in hosts.state.values():
        node.containers["cvs-c"] = ("running", {})
    rt = runtime(hosts, lifetime="persistent")
    assert [r.stdout for r in rt.launch()] == ["attached", "attached"]
    assert rt.mode == "attached"
    assert not any(c.startswith(("docker run", "docker rm")) for _, c in hosts.log)
    assert [r.stdout for r in rt.remove()] == ["persistent: left running"] * 2
    assert all(r.ok for r in rt.remove(force=True)) and hosts.state["n0"].containers == {}


def test_persistent_refuses_when_running_on_some_nodes_only(hosts):
    hosts.state["n0"].containers["cvs-c"] = ("running", {})
    results = runtime(hosts, lifetime="persistent").launch()
    assert [r.ok for r in results] == [False, False]
    assert "running on: n0; not on: n1" in results[0].error
    assert results[1].error.startswith("node n1: container 'cvs-c' is absent: refusing to relaunch")
    assert not any(c.startswith(("docker run", "docker rm")) for _, c in hosts.log)


def test_persistent_launches_when_running_nowhere(hosts):
    rt = runtime(hosts, lifetime="persistent")
    assert all(r.ok for r in rt.launch()) and rt.mode == "launched"


def test_no_launch_only_verifies_and_never_removes(hosts):
    hosts.state["n0"].containers["cvs-c"] = ("running", {})
    rt = runtime(hosts, lifetime="no_launch")
    results = rt.launch()
    assert results[0].ok
    assert results[1].error == ("node n1: container 'cvs-c' is absent; lifetime no_launch never "
                                "starts containers — start it first")
    assert all(r.ok for r in rt.remove(force=True))
    assert [c.split()[1] for _, c in hosts.log] == ["container"] * 2


def test_remove_treats_an_absent_container_as_removed(hosts):
    hosts.state["n0"].containers["cvs-c"] = ("running", {})
    results = runtime(hosts).remove()
    assert [(r.ok, r.stdout) for r in results] == [(True, "removed"), (True, "removed")]


def test_exec_runs_inside_the_container_with_one_command_per_node(hosts):
    for node in hosts.state.values():
        node.containers["cvs-c"] = ("running", {})
    results = runtime(hosts).exec(["echo 'rank 0'", "echo rank 1"], timeout=10)
    assert [c for _, c in hosts.log] == [
        "docker exec cvs-c bash -lc 'echo '\"'\"'rank 0'\"'\"''", "docker exec cvs-c bash -lc 'echo rank 1'"]
    assert results[1].stdout == "exec in cvs-c: echo rank 1\n"


def test_host_runtime_runs_on_the_node_and_only_checks_it_answers(hosts):
    rt = runtime(hosts, runtime={"name": "host"}, name="")
    assert isinstance(rt, HostRuntime)
    assert all(r.ok for r in rt.launch()) and rt.running() == [True, True]
    rt.exec("nproc", timeout=5)
    assert [c for n, c in hosts.log if n == "n0"] == ["true", "true", "bash -lc nproc"]


def test_unknown_runtime_is_bad_input(hosts):
    with pytest.raises(BadInput, match="container.runtime.name: 'enroot' is not supported"):
        runtime(hosts, runtime={"name": "enroot"})


def test_leftovers_are_found_by_label_and_removed_per_node(hosts):
    hosts.state["n0"].containers.update({
        "cvs-a": ("running", {"cvs.run_id": "r1", "cvs.owner": "alice", "cvs.name": "cvs-a"}),
        "other": ("running", {})})
    hosts.state["n1"].fail["docker ps"] = [err(1, "Cannot connect to the Docker daemon")]
    scan = find_leftovers(hosts)
    assert [(x.host, x.name, x.state, x.run_id, x.owner) for x in scan.found] == [
        ("n0", "cvs-a", "running", "r1", "alice")]
    assert scan.errors == ["node n1: exit status 1: Cannot connect to the Docker daemon"]
    results = remove_leftovers(hosts, scan.found, retry=RetryPolicy(attempts=1))
    assert all(r.ok for r in results)
    assert hosts.commands("n0")[-1] == "docker rm -f cvs-a" and hosts.commands("n1")[-1] == "true"
    assert list(hosts.state["n0"].containers) == ["other"]
