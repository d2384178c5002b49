"""The Slurm scale testbed's plan (pure parts): valid, distinct loopback addresses up to its limit,
ports apart from the other testbeds', and the cluster file the harness reads."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from testbed import slurm, slurm_scale


def test_every_node_gets_its_own_valid_loopback_address_up_to_the_limit():
    addresses = slurm_scale.addresses(slurm_scale.MAX_NODES)
    assert len(set(addresses)) == slurm_scale.MAX_NODES
    assert all(ipaddress.ip_address(a).is_loopback for a in addresses)
    assert addresses[:2] == ["127.2.0.10", "127.2.0.11"] and addresses[200] == "127.2.1.10"
    with pytest.raises(ValueError, match="1 to 1000"):
        slurm_scale.addresses(slurm_scale.MAX_NODES + 1)


def test_its_ports_stay_clear_of_the_other_slurm_clusters_and_the_ephemeral_range():
    ports = range(slurm_scale.FIRST_PORT, slurm_scale.FIRST_PORT + slurm_scale.MAX_NODES)
    others = {slurm.CTLD_PORT, *range(slurm.FIRST_SLURMD_PORT, slurm.FIRST_SLURMD_PORT + 253), 26817, 18817}
    assert not others & {slurm_scale.CTLD_PORT, *ports} and ports[-1] < 32768


def test_the_cluster_file_asks_for_every_node_without_a_container():
    body = slurm_scale.cluster_file_body(64, Path("/s/slurm.conf"))
    assert body["scheduler"] == {"name": "slurm", "nodes": 64, "partition": "cvs", "container": "none",
                                 "slurm_conf": "/s/slurm.conf"}
