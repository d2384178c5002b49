"""DryRunHosts: prints what would run, answers success, and lets a docker launch walk through."""

from __future__ import annotations

from cvs_tasks.remote import runtime_for
from cvs_tasks.remote.docker_cmd import remove_own_command
from cvs_tasks.remote.dryrun import DryRunHosts


def test_dry_run_prints_each_command_per_node_and_never_the_stdin_or_content():
    said: list[str] = []
    hosts = DryRunHosts(["10.0.0.1", "10.0.0.2"], echo=said.append)
    assert all(r.ok for r in hosts.run(["echo a", "echo b"], timeout=5, stdin="s3cret"))
    assert all(r.ok for r in hosts.put(b"hf_CANARY", "/run/t", timeout=5))
    reads = hosts.read_from(["/l", "/l"], [3, 4], 64, timeout=5)
    assert [(r.offset, r.size, r.data) for r in reads] == [(3, None, ""), (4, None, "")]
    assert said == ["[dry-run] 10.0.0.1: echo a <stdin>", "[dry-run] 10.0.0.2: echo b <stdin>",
                    "[dry-run] 10.0.0.1: write /run/t (mode 600, 9 bytes)",
                    "[dry-run] 10.0.0.2: write /run/t (mode 600, 9 bytes)"]
    assert not any("s3cret" in line or "CANARY" in line for line in said)


def test_a_docker_launch_walks_through_in_a_dry_run():
    said: list[str] = []
    hosts = DryRunHosts(["n0", "n1"], echo=said.append)
    rt = runtime_for(hosts, {"name": "c", "image": "img", "runtime": {"name": "docker"}},
                     run_id="r", owner="o", nnodes=2)
    assert all(r.ok for r in rt.launch())
    assert [line.split(": ", 1)[1] for line in said if line.startswith("[dry-run] n0")] == [
        remove_own_command("c", "r"), "docker image inspect --format '{{.Id}}' img",
        "docker run -d --name c --label cvs.run_id=r --label cvs.owner=o --label cvs.name=c "
        "--network host --ipc host --privileged --device /dev/kfd --device /dev/dri --device /dev/infiniband "
        "--cap-add IPC_LOCK --cap-add SYS_PTRACE --security-opt seccomp=unconfined --group-add video "
        "--ulimit memlock=-1 -e NNODES=2 img sleep infinity",
        "docker container inspect --format '{{.State.Status}}' c"]


def test_a_command_the_harness_said_what_to_expect_of_gets_that_answer_also_inside_the_container():
    """A stage that needs an answer to go on (the lock taken, the Primus YAML found, the checkpoint
    saved) says what a node would answer; the dry run answers so, wherever the command is wrapped."""
    said: list[str] = []
    hosts = DryRunHosts(["n0", "n1"], echo=said.append)
    check = "cat '/ckpt/it'\"'\"'s/latest_checkpointed_iteration.txt'"
    hosts.answer(check, "20\n")
    rt = runtime_for(hosts, {"name": "c", "image": "img", "runtime": {"name": "docker"}},
                     run_id="r", owner="o", nnodes=2)
    assert [r.stdout for r in rt.exec(check, timeout=5)] == ["20\n", "20\n"]
    assert [r.stdout for r in hosts.subset([1]).run(f"(mkdir -p /x) && {{ {check}; }}", timeout=5)] == ["20\n"]
    assert [r.stdout for r in hosts.run("cat /other", timeout=5)] == ["", ""]
    hosts.answer(check, "40\n")  # the latest expectation wins
    assert hosts.run(check, timeout=5)[0].stdout == "40\n"


def test_hosts_that_run_commands_ignore_what_a_dry_run_would_assume():
    from cvs_tasks.remote.testing import ScriptedHosts

    hosts = ScriptedHosts(["n0"])
    hosts.answer("cat /x", "20\n")
    hosts.assume("/x", "a rule")
    hosts.expect("cat /x", stdout="7\n")
    assert hosts.run("cat /x", timeout=5)[0].stdout == "7\n"
    hosts.assert_done()
