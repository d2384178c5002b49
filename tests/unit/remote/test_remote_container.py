"""Container runtimes against scripted nodes: lifetimes, rollback, retries — by what they send."""

from __future__ import annotations

import re

import pytest

from cvs_tasks.errors import BadInput
from cvs_tasks.remote import HostRuntime, RetryPolicy, runtime_for
from cvs_tasks.remote import docker_cmd as dc
from cvs_tasks.remote.leftovers import find_leftovers, remove_leftovers
from cvs_tasks.remote.testing import ScriptedHosts

IMAGE = "rocm/megatron-lm:v25.9"
RM = dc.remove_own_command("cvs-c", "run1")  # removes only an absent, stopped or own container
GONE = "Error response from daemon: No such container: cvs-c"
HAS_IMAGE = f"docker image inspect --format '{{{{.Id}}}}' {IMAGE}"
NO_IMAGE = f"Error: No such image: {IMAGE}"
DEFAULT_FLAGS = ("--ipc host --privileged --device /dev/kfd --device /dev/dri --device /dev/infiniband "
                 "--cap-add IPC_LOCK --cap-add SYS_PTRACE --security-opt seccomp=unconfined --group-add video "
                 "--ulimit memlock=-1")  # the container defaults (config/container_defaults.py)
RUN = ("docker run -d --name cvs-c --label cvs.run_id=run1 --label cvs.owner=alice "
       f"--label cvs.name=cvs-c --network host {DEFAULT_FLAGS} -e NNODES=2 rocm/megatron-lm:v25.9 sleep infinity")
STATE = "docker container inspect --format '{{.State.Status}}' cvs-c"
PULL = f"docker pull {IMAGE}"


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
    with ScriptedHosts(["n0", "n1"]) as scripted:  # leaving the test: every expected command came
        yield scripted


def test_per_run_clears_leftovers_launches_and_verifies(hosts):
    hosts.expect(RM, exit=1, stderr=GONE, on="n0").expect(RM, stdout="cvs-c\n", on="n1")  # n1 had an old one
    hosts.expect(HAS_IMAGE, stdout="sha256:1\n").expect(RUN, stdout="cvs-c-id\n").expect(STATE, stdout="running\n")
    hosts.expect(STATE, stdout="running\n")  # running() below
    rt = runtime(hosts)
    results = rt.launch()
    assert [(r.host, r.ok, r.stdout) for r in results] == [("n0", True, "cvs-c-id"), ("n1", True, "cvs-c-id")]
    assert hosts.commands("n0") == [RM, HAS_IMAGE, RUN, STATE]
    assert rt.mode == "launched" and rt.attempts == []
    assert rt.running() == [True, True]


def test_missing_image_is_loaded_from_the_tar_only_where_missing(hosts):
    hosts.expect(RM).expect(HAS_IMAGE, on="n0").expect(HAS_IMAGE, exit=1, stderr=NO_IMAGE, on="n1")
    hosts.expect("docker load -i /data/img.tar", stdout=f"Loaded image: {IMAGE}\n", on="n1")
    hosts.expect(HAS_IMAGE, on="n1")  # present now
    hosts.expect(re.compile("^docker run "), stdout="cvs-c-id\n").expect(STATE, stdout="running\n")
    results = runtime(hosts, image_tar="/data/img.tar").launch()
    assert all(r.ok for r in results)
    assert not any("load" in c for c in hosts.commands("n0"))


def test_pull_after_registry_login_is_retried_only_on_the_failing_node(hosts):
    login = "docker login --username bot --password-stdin reg.example < /etc/cvs/pw"
    hosts.expect(RM).expect(HAS_IMAGE, exit=1, stderr=NO_IMAGE).expect(login)
    hosts.expect(PULL, on="n0")
    hosts.expect(PULL, exit=1, stderr="net/http: TLS handshake timeout", on="n1").expect(PULL, on="n1")
    hosts.expect(HAS_IMAGE).expect(re.compile("^docker run ")).expect(STATE, stdout="running\n")
    registry = {"username": "bot", "password_file": "/etc/cvs/pw", "server": "reg.example"}
    rt = runtime(hosts, runtime={"name": "docker", "args": {"registry": registry}})
    assert all(r.ok for r in rt.launch())
    assert [(a.step, a.attempt, a.error) for a in rt.attempts] == [
        ("docker pull", 1, "node n1: exit status 1: net/http: TLS handshake timeout")]


def test_a_failed_run_on_one_node_removes_what_was_started(hosts):
    hosts.expect(RM).expect(HAS_IMAGE)
    hosts.expect(RUN, stdout="cvs-c-id\n", on="n0").expect(STATE, stdout="running\n", on="n0")
    hosts.expect(RUN, exit=125, stderr="docker: Error: unknown device /dev/kfd", on="n1")
    hosts.expect(RM, on="n0")  # rolled back where it started
    results = runtime(hosts).launch()
    assert [r.ok for r in results] == [False, False]
    assert results[1].error == "node n1: docker run: exit status 125: docker: Error: unknown device /dev/kfd"
    assert results[0].error == "node n0: removed again: the launch failed on n1"


def test_a_container_that_exits_at_once_fails_verification(hosts):
    hosts.expect(RM).expect(HAS_IMAGE).expect(RUN, stdout="cvs-c-id\n")
    hosts.expect(STATE, stdout="exited\n", on="n0").expect(STATE, stdout="running\n", on="n1")
    hosts.expect(RM)  # both removed again
    results = runtime(hosts).launch()
    assert results[0].error == "node n0: container is exited right after docker run (see `docker logs cvs-c`)"
    assert results[1].error == "node n1: removed again: the launch failed on n0"


def test_persistent_attaches_when_running_everywhere(hosts):
    hosts.expect(STATE, stdout="running\n")  # nothing else: no docker run, no docker rm
    rt = runtime(hosts, lifetime="persistent")
    assert [r.stdout for r in rt.launch()] == ["attached", "attached"]
    assert rt.mode == "attached"
    assert [r.stdout for r in rt.remove()] == ["persistent: left running"] * 2
    hosts.expect("docker rm -f cvs-c")  # forced: a persistent container is shared by runs, removed whoever started it
    assert all(r.ok for r in rt.remove(force=True))


def test_persistent_refuses_when_running_on_some_nodes_only(hosts):
    hosts.expect(STATE, stdout="running\n", on="n0").expect(STATE, exit=1, stderr=GONE, on="n1")
    results = runtime(hosts, lifetime="persistent").launch()
    assert [r.ok for r in results] == [False, False]
    assert "running on: n0; not on: n1" in results[0].error
    assert results[1].error.startswith("node n1: container 'cvs-c' is absent: refusing to relaunch")


def test_persistent_launches_when_running_nowhere(hosts):
    hosts.expect(STATE, exit=1, stderr=GONE).expect(RM, exit=1, stderr=GONE).expect(HAS_IMAGE)
    hosts.expect(re.compile("^docker run ")).expect(STATE, stdout="running\n")
    rt = runtime(hosts, lifetime="persistent")
    assert all(r.ok for r in rt.launch()) and rt.mode == "launched"


def test_no_launch_only_verifies_and_never_removes(hosts):
    hosts.expect(STATE, stdout="running\n", on="n0").expect(STATE, exit=1, stderr=GONE, on="n1")
    rt = runtime(hosts, lifetime="no_launch")
    results = rt.launch()
    assert results[0].ok
    assert results[1].error == ("node n1: container 'cvs-c' is absent; lifetime no_launch never "
                                "starts containers — start it first")
    assert all(r.ok for r in rt.remove(force=True))  # and sends nothing


def test_remove_treats_an_absent_container_as_removed(hosts):
    hosts.expect(RM, stdout="cvs-c\n", on="n0").expect(RM, exit=1, stderr=GONE, on="n1")
    results = runtime(hosts).remove()
    assert [(r.ok, r.stdout) for r in results] == [(True, "removed"), (True, "removed")]


def test_exec_runs_inside_the_container_with_one_command_per_node(hosts):
    hosts.expect("docker exec cvs-c bash -lc 'echo '\"'\"'rank 0'\"'\"''", stdout="rank 0\n", on="n0")
    hosts.expect("docker exec cvs-c bash -lc 'echo rank 1'", stdout="rank 1\n", on="n1")
    results = runtime(hosts).exec(["echo 'rank 0'", "echo rank 1"], timeout=10)
    assert [r.stdout for r in results] == ["rank 0\n", "rank 1\n"]


def test_host_runtime_runs_on_the_node_and_only_checks_it_answers(hosts):
    hosts.expect("true", times=2).expect("bash -lc nproc", stdout="8\n")
    rt = runtime(hosts, runtime={"name": "host"}, name="")
    assert isinstance(rt, HostRuntime)
    assert all(r.ok for r in rt.launch()) and rt.running() == [True, True]
    assert [r.stdout for r in rt.exec("nproc", timeout=5)] == ["8\n", "8\n"]


def test_unknown_runtime_is_bad_input(hosts):
    with pytest.raises(BadInput, match="container.runtime.name: 'enroot' is not supported"):
        runtime(hosts, runtime={"name": "enroot"})


def test_leftovers_are_found_by_label_and_removed_per_node(hosts):
    listing = re.compile(r"^docker ps -a --filter label=cvs\.run_id --format ")  # labelled ones only
    hosts.expect(listing, stdout="cvs-a\trunning\tr1\talice\tcvs-a\n", on="n0")
    hosts.expect(listing, exit=1, stderr="Cannot connect to the Docker daemon", on="n1")
    hosts.expect("docker rm -f cvs-a", on="n0").expect("true", on="n1")
    scan = find_leftovers(hosts)
    assert [(x.host, x.name, x.state, x.run_id, x.owner) for x in scan.found] == [
        ("n0", "cvs-a", "running", "r1", "alice")]
    assert scan.errors == ["node n1: exit status 1: Cannot connect to the Docker daemon"]
    results = remove_leftovers(hosts, scan.found, retry=RetryPolicy(attempts=1))
    assert all(r.ok for r in results)


IN_USE = "cvs-tasks: in use: running run2 bob"


def test_another_runs_running_container_is_never_removed_and_named(hosts):
    """A second run of the same config on the same nodes (same container name) must not remove the
    first run's container: the launch fails on that node naming the run, teardown leaves it."""
    hosts.expect(RM, on="n0").expect(RM, exit=dc.IN_USE_EXIT, stderr=IN_USE + "\n", on="n1")
    hosts.expect(HAS_IMAGE, stdout="sha256:1\n", on="n0").expect(RUN, stdout="cvs-c-id\n", on="n0")
    hosts.expect(STATE, stdout="running\n", on="n0").expect(RM, on="n0")  # n0 rolled back: its own
    rt = runtime(hosts)
    n0, n1 = rt.launch()
    assert not n1.ok and "running for run run2 of bob, not this run (run1)" in n1.error
    assert "invoke cleanup" in n1.error and "removed again" in n0.error
    assert [a.step for a in rt.attempts] == []  # refused, not retried: waiting cannot help
    hosts.expect(RM, on="n0").expect(RM, exit=dc.IN_USE_EXIT, stderr=IN_USE + "\n", on="n1")
    n0, n1 = rt.remove()  # teardown of the refused run
    assert n0.ok and n0.stdout == "removed"
    assert n1.ok and n1.stdout.startswith("left running: container 'cvs-c' is running for run run2 of bob")


def test_an_unlabelled_running_container_is_not_ours_to_remove(hosts):
    hosts.expect(RM, exit=dc.IN_USE_EXIT, stderr="cvs-tasks: in use: running\n")
    results = runtime(hosts).launch()
    assert all("a container cvs-tasks did not start" in r.error for r in results)


@pytest.mark.parametrize("state, removed, code", [
    ("absent", False, 0), ("down", False, 1), ("running run1 alice", True, 0), ("exited run2 bob", True, 0),
    ("running run2 bob", False, dc.IN_USE_EXIT), ("running  ", False, dc.IN_USE_EXIT),
    ("running * *", False, dc.IN_USE_EXIT),
])
def test_the_guarded_removal_in_real_bash(tmp_path, state, removed, code):
    """The node side of ``remove_own_command``, in bash against a stub docker answering inspect as
    docker does (verified against a real dockerd: no label prints an empty field)."""
    import os
    import subprocess

    stub = tmp_path / "docker"
    stub.write_text("#!/bin/bash\necho \"$@\" >> \"$CALLS\"\n"
                    "if [ \"$1\" = container ]; then case \"$STUB\" in\n"
                    "  absent) echo \"Error response from daemon: No such container: x\" >&2; exit 1;;\n"
                    "  down) echo 'Cannot connect to the Docker daemon' >&2; exit 1;;\n"
                    "  *) echo \"$STUB\";; esac; fi\n")
    stub.chmod(0o755)
    calls = tmp_path / "calls"
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}", STUB=state, CALLS=str(calls))
    done = subprocess.run(["bash", "-c", RM], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == code, done.stderr
    assert ("rm -f cvs-c" in calls.read_text()) is removed
    if code == dc.IN_USE_EXIT:
        assert dc.in_use_by(done.stderr) == tuple((state.split() + ["", "", ""])[1:3])
