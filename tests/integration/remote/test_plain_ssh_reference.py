"""The benchmarks' reference SSH cost (``benchmarks/plain_ssh.py``) against a real sshd."""

from __future__ import annotations

import paramiko
import pytest

from benchmarks.plain_ssh import exec_round_trip_cpu


def test_a_plain_exec_round_trip_costs_some_cpu_of_this_process(sshd, trusted):
    cpu = exec_round_trip_cpu(sshd.address, sshd.port, "root", str(sshd.client_key), trusted, round_trips=5)
    print(f"plain exec round trip: {cpu * 1000:.2f} ms CPU")
    assert 0 < cpu < 1.0


def test_a_failing_command_is_not_a_round_trip(sshd, trusted):
    with pytest.raises(RuntimeError, match="exited 3"):
        exec_round_trip_cpu(sshd.address, sshd.port, "root", str(sshd.client_key), trusted, command="exit 3",
                            round_trips=1)


def test_an_unknown_host_key_is_refused(sshd, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(paramiko.SSHException):
        exec_round_trip_cpu(sshd.address, sshd.port, "root", str(sshd.client_key), empty, round_trips=1)


def test_the_reference_reaches_a_cluster_files_first_node_as_connect_would(sshd, trusted, tmp_path):
    import json

    from benchmarks.plain_ssh import cluster_round_trip_cpu

    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"username": "root", "priv_key_file": str(sshd.client_key), "password": None,
                                   "known_hosts": str(trusted), "head_node_dict": {"mgmt_ip": sshd.address},
                                   "node_dict": {sshd.address: {"port": sshd.port}}}))
    assert 0 < cluster_round_trip_cpu(cluster, round_trips=2) < 1.0
