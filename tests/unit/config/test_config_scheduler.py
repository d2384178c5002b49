"""Cluster files that name a scheduler: what is required, what is refused, with dotted paths."""

from __future__ import annotations

import pytest
from config_helpers import write_json

from cvs_tasks.config import ConfigError, load_cluster


def load(tmp_path, **data):
    return load_cluster(write_json(tmp_path / "cluster.json", data))


def problems(tmp_path, **data) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, **data)
    return dict(info.value.problems)


def test_a_scheduler_needs_no_node_list_key_or_username(tmp_path):
    c = load(tmp_path, scheduler={"name": "slurm", "nodes": 2, "partition": "mi300x", "time": "00:30:00",
                                  "container": "pyxis"})
    assert c.hosts == [] and c.scheduler.nodes == 2 and c.scheduler.container == "pyxis"
    assert c.scheduler.allocation_wait_s == 300 and c.scheduler.drain_failed is False


def test_node_dict_with_a_scheduler_names_the_nodes_and_must_agree(tmp_path):
    c = load(tmp_path, scheduler={"name": "slurm"}, node_dict=["gpu01", "gpu02"])
    assert [h.name for h in c.hosts] == ["gpu01", "gpu02"]
    found = problems(tmp_path, scheduler={"name": "slurm", "nodes": 3, "nodelist": "gpu[01-03]"},
                     node_dict=["gpu01", "gpu02"])
    assert found["scheduler.nodes"] == "3 does not match the 2 host(s) in node_dict"
    assert found["scheduler.nodelist"] == "give either scheduler.nodelist or node_dict, not both"


def test_bad_scheduler_fields_are_all_named(tmp_path):
    found = problems(tmp_path, scheduler={"name": "pbs", "nodes": 0, "time": "half an hour",
                                          "partition": "a b; rm -rf /", "container": "podman",
                                          "job_id": "12;x", "sallocargs": "--x"})
    assert set(found) >= {"scheduler.name", "scheduler.nodes", "scheduler.time", "scheduler.partition",
                          "scheduler.container", "scheduler.job_id", "scheduler.sallocargs"}
    assert "not a Slurm time" in found["scheduler.time"]


def test_without_a_scheduler_the_ssh_keys_stay_required(tmp_path):
    found = problems(tmp_path, node_dict={"h": {}})
    assert found["username"] == "required key is missing" and found["priv_key_file"] == "required key is missing"
