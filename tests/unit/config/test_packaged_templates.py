"""The templates are package data (cvs_tasks/templates, found through importlib.resources); the
repository root's configs/, thresholds/ and cluster/ are symlinks to them; `{cvs-root}` without a
checkout (a wheel install) is a config error naming every place it is used.
(tests/integration/test_wheel_install.py installs a real wheel.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cvs_tasks.config import ConfigError, list_templates, load_suite
from cvs_tasks.config.placeholders import NO_CHECKOUT, cvs_root_problems
from cvs_tasks.templates import FOLDERS, checkout_root, template_dir

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("folder", FOLDERS)
def test_each_root_folder_is_a_relative_symlink_to_the_packaged_one(folder):
    link = REPO / folder
    assert link.is_symlink() and not Path(link.readlink()).is_absolute()
    assert link.resolve() == template_dir(folder).resolve()
    assert template_dir(folder).is_relative_to(REPO / "cvs_tasks")


def test_every_listed_template_lives_in_the_package():
    templates = list_templates()
    assert {t.kind for t in templates} == {"config", "threshold", "cluster"}
    assert all(t.path.is_relative_to(REPO / "cvs_tasks" / "templates") for t in templates)


def test_an_unknown_folder_is_refused():
    with pytest.raises(ValueError, match="known: configs, thresholds, cluster"):
        template_dir("reports")


def test_the_checkout_is_found_from_the_package():
    assert checkout_root() == REPO


def test_cvs_root_problems_name_every_place():
    data = {"paths": {"hf_token_file": "{cvs-root}/token", "log_dir": "/tmp/x"},
            "gpu": {"checks": ["ok", "{cvs-root}/bin/rocm-smi"]}}
    assert cvs_root_problems(data) == [("paths.hf_token_file", NO_CHECKOUT), ("gpu.checks[1]", NO_CHECKOUT)]
    assert cvs_root_problems({"paths": {"log_dir": "/tmp/{run-id}"}}) == []


def test_a_testbed_config_without_a_checkout_is_a_config_error(monkeypatch):
    monkeypatch.setattr("cvs_tasks.config.load.checkout_root", lambda: None)
    demo = template_dir("configs") / "testbed" / "demo_host.json"
    with pytest.raises(ConfigError) as info:
        load_suite(demo)
    places = [where for where, message in info.value.problems if message == NO_CHECKOUT]
    raw = {k: v for k, v in json.loads(demo.read_text(encoding="utf-8")).items() if not k.startswith("_")}
    assert places == [where for where, _ in cvs_root_problems(raw)] and "paths.hf_token_file" in places
    assert "pip install -e ." in str(info.value)


def test_the_same_config_loads_in_a_checkout():
    suite = load_suite(REPO / "configs" / "testbed" / "demo_host.json")
    assert suite.config.paths.hf_token_file == str(REPO / "configs" / "testbed" / "dummy_hf_token")
