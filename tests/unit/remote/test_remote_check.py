"""cluster.check: per-node verdicts with reasons, and the table (pure parts separately)."""

from __future__ import annotations

import json
import subprocess

import pytest
from invoke import Context
from invoke.exceptions import Exit

from cvs_tasks.remote import LocalHosts, Node
from cvs_tasks.remote.check import (
    PROBE_MARK,
    CheckItem,
    NodeCheck,
    check_nodes,
    disk_command,
    format_check_table,
    parse_df_available_kib,
    parse_probe,
    probe_command,
)
from cvs_tasks.remote.testing import ScriptedHosts
from cvs_tasks.tasks import cluster as cluster_tasks

DF = """Filesystem     1024-blocks      Used Available Capacity Mounted on
/dev/nvme0n1p2  1921724676 503417300 1320634660      28% /
"""


def test_parse_df():
    assert parse_df_available_kib(DF) == 1320634660
    assert parse_df_available_kib("garbage") is None


def test_disk_command_walks_up_to_an_existing_parent(tmp_path):
    [result] = LocalHosts([Node("a", "a")]).run(disk_command(str(tmp_path / "not" / "yet")), timeout=10)
    assert result.ok and parse_df_available_kib(result.stdout) is not None


def probe_output(**probes: tuple[int, str]) -> str:
    """What ``probe_command`` prints on a node whose probes exited with these statuses."""
    # like the shell's $(...), the captured output loses its trailing newlines
    return "".join(f"{PROBE_MARK} {name} {code}\n{out.rstrip(chr(10))}\n" for name, (code, out) in probes.items())


def probing(answers: dict[str, dict]) -> ScriptedHosts:
    """Nodes that each expect the combined probe once (one round trip) and answer it as given."""
    hosts = ScriptedHosts(list(answers))
    for name, reply in answers.items():
        hosts.expect(lambda command: PROBE_MARK in command, on=name, **reply)
    return hosts


def test_one_probe_command_runs_every_check_and_its_output_parses():
    command = probe_command("docker", "img", "/var/log/cvs", "test -e /dev/kfd")
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)
    probes = parse_probe(done.stdout)
    assert list(probes)[:4] == ["docker", "image", "gpus", "disk"]
    assert all(name.startswith("fp_") for name in list(probes)[4:])  # the node fingerprint rides along
    assert parse_df_available_kib(probes["disk"][1]) is not None
    assert (parse_probe(probe_output(gpus=(1, "a\nb"), disk=(0, DF)))
            == {"gpus": (1, "a\nb"), "disk": (0, DF.rstrip("\n"))})


def test_check_nodes_reports_each_check_with_a_reason():
    hosts = probing({
        "n0": dict(stdout=probe_output(docker=(0, "27.1"), image=(0, "sha256:1"), gpus=(0, ""), disk=(0, DF))),
        "n1": dict(stdout=probe_output(docker=(0, "27.1"), image=(1, "No such image: img"), gpus=(1, ""),
                                       disk=(0, DF))),
        "n2": dict(error="ssh: connect to host n2: Connection refused"),
    })
    checks = check_nodes(hosts, {"name": "docker"}, "img", "/var/log/cvs", "test -e /dev/kfd",
                         min_free_gib=2000)
    table = {c.host: [(i.name, i.ok) for i in c.items] for c in checks}
    assert table == {
        "n0": [("ssh", True), ("docker", True), ("image", True), ("gpus", True), ("disk", False), ("versions", None)],
        "n1": [("ssh", True), ("docker", True), ("image", False), ("gpus", False), ("disk", False), ("versions", None)],
        "n2": [("ssh", False), ("docker", None), ("image", None), ("gpus", None), ("disk", None), ("versions", None)],
    }
    assert checks[0].items[1].detail == "server 27.1"
    assert checks[0].items[4].detail == "1259.5 GiB free in /var/log/cvs, need 2000"
    assert checks[1].items[2].detail == "img not present (the launch will pull or load it)"
    assert checks[2].items[0].detail == "ssh: connect to host n2: Connection refused"
    hosts.assert_done()  # one round trip per node


def test_docker_down_skips_the_image_check_with_the_reason():
    hosts = probing({"n0": dict(stdout=probe_output(docker=(1, "Cannot connect to the Docker daemon"),
                                                    image=(1, "Cannot connect"), gpus=(0, ""), disk=(0, DF)))})
    [check] = check_nodes(hosts, "docker", "img", "/", "true", min_free_gib=1)
    assert [(i.name, i.ok) for i in check.items][1:3] == [("docker", False), ("image", None)]
    assert "Cannot connect to the Docker daemon" in check.items[1].detail


def test_host_runtime_skips_docker_and_image_on_a_real_shell():
    checks = check_nodes(LocalHosts([Node("n0", "n0")]), "host", "img", "/", "true", min_free_gib=0)
    assert [(i.name, i.ok, i.detail) for i in checks[0].items][:3] == [
        ("ssh", True, "ok"), ("docker", None, "skipped: runtime host"),
        ("image", None, "skipped: runtime host")]
    assert checks[0].ok
    failing = check_nodes(LocalHosts([Node("n0", "n0")]), "host", None, "/", "exit 3", min_free_gib=0)
    assert failing[0].items[3] == CheckItem("gpus", False, "`exit 3` failed: exit 3")


def test_table_lists_marks_and_the_reasons_below():
    checks = [NodeCheck("10.0.0.1", 0, (CheckItem("ssh", True, "ok"), CheckItem("docker", True, "27"),
                                        CheckItem("image", True, "img"), CheckItem("gpus", True, "x"),
                                        CheckItem("disk", True, "9 GiB"), CheckItem("versions", True, "kernel 6.8"))),
              NodeCheck("n2", 1, (CheckItem("ssh", False, "connection refused"),
                                  *(CheckItem(n, None, "skipped: no SSH")
                                    for n in ("docker", "image", "gpus", "disk", "versions"))))]
    assert format_check_table(checks) == "\n".join([
        "node      ssh   docker  image  gpus  disk  versions  result",
        "10.0.0.1  ok    ok      ok     ok    ok    ok        PASS",
        "n2        FAIL  -       -      -     -     -         FAIL",
        "",
        "details:",
        "  n2: ssh: connection refused",
        "  n2: docker: skipped: no SSH",
        "  n2: image: skipped: no SSH",
        "  n2: gpus: skipped: no SSH",
        "  n2: disk: skipped: no SSH",
        "  n2: versions: skipped: no SSH",
    ])


def test_check_task_prints_the_table_and_exits_3_naming_the_failed_node(tmp_path, capsys):
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({
        "username": "root", "priv_key_file": str(tmp_path / "no-key"),
        "node_dict": {"localhost": {"local": True}, "ghost": {"address": "127.0.0.99"}},
        "container": {"runtime": {"name": "host"}}}))
    with pytest.raises(Exit) as exc:
        cluster_tasks.check(Context(), cluster=str(cluster), known_hosts=str(tmp_path / "kh"),
                            connect_timeout=2)
    out = capsys.readouterr().out
    assert exc.value.code == 3
    assert "cluster check failed on" in exc.value.message and "ghost (ssh, gpus" not in exc.value.message
    assert "ghost (ssh)" in exc.value.message
    assert "ghost: ssh: connection refused (port 22)" in out
    assert out.splitlines()[0].split() == ["node", "ssh", "docker", "image", "gpus", "disk", "versions", "result"]


def test_cluster_namespace_tasks_have_help_for_every_flag():
    ns = cluster_tasks.ns
    assert ns.name == "cluster" and set(ns.task_names) == {"check", "trust"}
    for name in ns.task_names:
        task = ns[name]
        assert task.__doc__
        params = [p for p in task.argspec(task.body).parameters]
        assert set(task.help) == set(params), name
