"""Cluster file: node_dict shapes, local hosts, required fields, placeholders."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_helpers import write_json

from cvs_tasks.config import ConfigError, HostSpec, load_cluster

REPO = Path(__file__).resolve().parents[3]


def cluster(tmp_path, **data):
    body = {"username": "u", "priv_key_file": "/k", **data}
    return load_cluster(write_json(tmp_path / "cluster.json", body))


def problems(tmp_path, **data) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        cluster(tmp_path, **data)
    return dict(info.value.problems)


def test_dict_node_dict_keeps_file_order_and_settings(tmp_path):
    c = cluster(tmp_path, node_dict={"10.0.0.2": {"vpc_ip": "10.0.0.2"},
                                     "node-a": {"address": "10.1.1.1", "port": 2222}})
    assert c.hosts == [HostSpec("10.0.0.2", "10.0.0.2", 22, False), HostSpec("node-a", "10.1.1.1", 2222, False)]
    assert c.host_names == ["10.0.0.2", "node-a"] and c.username == "u" and c.priv_key_file == "/k"


def test_list_node_dict_accepts_mgmt_ip_objects_and_strings(tmp_path):
    c = cluster(tmp_path, node_dict=[{"mgmt_ip": "10.0.0.1"}, "10.0.0.2"])
    assert [h.address for h in c.hosts] == ["10.0.0.1", "10.0.0.2"]


def test_local_entry_and_plain_localhost_need_no_ssh(tmp_path):
    c = cluster(tmp_path, node_dict={"head": {"local": True}, "localhost": {}})
    assert [h.local for h in c.hosts] == [True, True]
    c = cluster(tmp_path, node_dict={"localhost": {"port": 2201}})
    assert c.hosts[0].local is False


def test_priv_key_is_optional_only_when_every_host_is_local(tmp_path):
    c = load_cluster(write_json(tmp_path / "c.json", {"username": "u", "priv_key_file": None,
                                                       "node_dict": {"localhost": {"local": True}}}))
    assert c.priv_key_file is None
    found = problems(tmp_path, priv_key_file=None, node_dict={"10.0.0.1": {}})
    assert "required" in found["priv_key_file"]


def test_required_fields_and_typos_are_all_reported(tmp_path):
    path = write_json(tmp_path / "c.json", {"node_dict": {"h": {"lcoal": True}}, "knwon_hosts": "/x"})
    with pytest.raises(ConfigError) as info:
        load_cluster(path)
    found = dict(info.value.problems)
    assert found["username"] == "required key is missing" and "priv_key_file" in found
    assert found["node_dict.h.lcoal"] == "unknown key (did you mean 'local'?)"
    assert found["knwon_hosts"] == "unknown key (did you mean 'known_hosts'?)"


def test_duplicate_and_empty_host_lists(tmp_path):
    assert "listed twice" in problems(tmp_path, node_dict=["10.0.0.1", {"mgmt_ip": "10.0.0.1"}])["node_dict[1]"]
    assert "no hosts" in problems(tmp_path, node_dict={})["node_dict"]
    assert "must be an object" in problems(tmp_path, node_dict="10.0.0.1")["node_dict"]


def test_password_login_is_refused(tmp_path):
    assert "priv_key_file" in problems(tmp_path, password="secret", node_dict={"h": {}})["password"]


def test_user_id_is_the_local_user_and_changeme_is_found_in_keys_and_values(tmp_path, monkeypatch):
    monkeypatch.setenv("USER", "carol")
    c = cluster(tmp_path, username="{user-id}", priv_key_file="/home/{user-id}/.ssh/id_rsa", node_dict={"h": {}})
    assert c.username == "carol" and c.priv_key_file == "/home/carol/.ssh/id_rsa"
    found = problems(tmp_path, known_hosts="<changeme>", node_dict={"10.0.0.9 <changeme>": {}})
    assert set(found) == {"known_hosts", 'node_dict["10.0.0.9 <changeme>"]'}


def test_container_defaults_and_known_hosts_are_kept(tmp_path):
    c = cluster(tmp_path, node_dict={"h": {}}, known_hosts="/kh", container={"image": "x"})
    assert c.container == {"image": "x"} and c.known_hosts == "/kh"


def test_packaged_cluster_files(monkeypatch):
    monkeypatch.setenv("USER", "dave")
    local = load_cluster(REPO / "cluster" / "localhost.json")
    assert [h.local for h in local.hosts] == [True] and local.username == "dave"
    with pytest.raises(ConfigError) as info:
        load_cluster(REPO / "cluster" / "cluster.json")
    assert len(info.value.problems) == 2
    assert all("<changeme>" in path for path, _ in info.value.problems)
