"""Container defaults: declared once with a reason, spelled out in every packaged template,
shown by `config.show`, and `omit_defaults` names only known rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from config_helpers import fill_template, minimal_config, write_json

from cvs_tasks.config import ConfigError, load_suite, shown_config
from cvs_tasks.config.container_defaults import CONTAINER_DEFAULTS, DEFAULT_IDS, describe_defaults, merge_defaults
from cvs_tasks.remote import docker_cmd as dc

REPO = Path(__file__).resolve().parents[3]
TEMPLATES = sorted(p.name for p in (REPO / "configs").glob("*.json"))


def test_every_default_has_a_one_line_reason_and_a_distinct_id():
    assert len(set(DEFAULT_IDS)) == len(CONTAINER_DEFAULTS)
    for row in CONTAINER_DEFAULTS:
        assert row.reason and "\n" not in row.reason and len(row.reason) < 120, row


@pytest.mark.parametrize("name", TEMPLATES)
def test_each_packaged_template_spells_the_defaults_out(name, tmp_path):
    filled = fill_template(json.loads((REPO / "configs" / name).read_text()), gpu="MI355X" if "mi355x" in name
                           else "MI300X", config_name=name)
    suite = load_suite(write_json(tmp_path / name, filled))
    statuses = {row["id"]: row["status"] for row in shown_config(suite)["_container_defaults"]}
    assert "added" not in statuses.values(), statuses
    assert statuses["ulimit:memlock"] == "in config" and statuses["group_add:video"] == "in config"
    assert statuses["devices:/dev/infiniband"].startswith("config: ")  # mounted as a volume already
    spec = dc.container_spec(suite.config.container)
    argv = dc.run_argv(spec, run_id="r", owner="o", nnodes=2)
    flags = [f"{a} {b}" for a, b in zip(argv, argv[1:]) if a.startswith("-")]
    assert len(flags) == len(set(flags)), "a flag appears twice"
    assert "--ulimit memlock=-1" in flags and "--group-add video" in flags and "--device /dev/kfd" in flags


def test_config_show_lists_each_default_with_its_reason(suite_files):
    suite = load_suite(suite_files())
    rows = shown_config(suite)["_container_defaults"]
    assert [r["id"] for r in rows] == list(DEFAULT_IDS)
    memlock = next(r for r in rows if r["id"] == "ulimit:memlock")
    assert memlock == {"flag": "--ulimit memlock=-1", "id": "ulimit:memlock", "status": "added",
                       "reason": next(d.reason for d in CONTAINER_DEFAULTS if d.id == "ulimit:memlock")}


def test_an_unknown_default_to_omit_is_a_config_error_naming_the_field(suite_files):
    config = minimal_config()
    config["container"]["runtime"]["args"] = {"omit_defaults": ["devices:/dev/kfd", "ulimit:stack"]}
    with pytest.raises(ConfigError) as err:
        load_suite(suite_files(config))
    assert "container.runtime.args.omit_defaults" in str(err.value)
    assert "ulimit:stack" in str(err.value) and "devices:/dev/infiniband" in str(err.value)


def test_the_host_runtime_shows_no_container_defaults(suite_files):
    config = minimal_config()
    config["container"]["runtime"] = {"name": "host"}
    assert "_container_defaults" not in shown_config(load_suite(suite_files(config)))


def test_merge_leaves_the_config_alone_where_it_speaks():
    merged, outcomes = merge_defaults({"ipc": "private", "shm_size": "8g", "ulimit": ["memlock=65536"]})
    assert merged["shm_size"] == "8g" and merged["ulimit"] == ["memlock=65536"]
    status = {d.id: s for d, s in outcomes}
    assert status["shm_size"] == "config: '8g'" and status["ulimit:memlock"] == "config: memlock=65536"
    assert describe_defaults({"ipc": "private"})[3]["status"] == "added"  # a private /dev/shm gets a size
