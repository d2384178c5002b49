"""A wheel installed (not editable) into a fresh virtual environment finds its own templates.

The wheel is built from a copy of the package (the checkout is not touched), installed into a new
venv (its dependencies come from the configured package index), and driven from an empty folder
with no PYTHONPATH, so nothing can come from the checkout: the library calls behind
`invoke config.list` and `config.copy` must find the templates through importlib.resources, a
copied template filled in must load with its threshold file, and a testbed config, whose
`{cvs-root}` names a checkout the wheel does not have, must be refused with a reason.
Slow tier: about 20 s with a warm package cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cvs_tasks.config import list_templates
from cvs_tasks.templates import template_dir
from tests.filled_templates import fill

pytestmark = pytest.mark.testbed
REPO = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT = 300

PROBE = """
import json, sys
from pathlib import Path
import cvs_tasks
from cvs_tasks import config as cfg
from cvs_tasks.templates import checkout_root, template_dir

step = sys.argv[1]
if step == "copy":
    out = {
        "module": cvs_tasks.__file__,
        "checkout": str(checkout_root()),
        "templates": [[t.kind, t.name, list(t.thresholds)] for t in cfg.list_templates()],
        "json": [str(p) for p in cfg.copy_template("mi3xx_megatron_llama-3.1-8b_single.json", "site/",
                                                   with_thresholds=True)],
        "toml": [str(p) for p in cfg.copy_template("mi355x_megatron_llama-3.1-8b_single.json", "toml/",
                                                   with_thresholds=True, fmt="toml")],
        "cluster": [str(p) for p in cfg.copy_template("localhost.json", "cluster.json")],
    }
    try:
        cfg.load_suite(template_dir("configs") / "testbed" / "demo_host.json")
        out["demo"] = "loaded"
    except cfg.ConfigError as exc:
        out["demo"] = str(exc)
elif step == "load":
    suite = cfg.load_suite(Path(sys.argv[2]), cfg.load_cluster("cluster.json"))
    out = {"combos": suite.combo_ids, "threshold": str(suite.threshold_path), "backend": suite.backend}
print(json.dumps(out))
"""


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: int = INSTALL_TIMEOUT) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, args))} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """(the venv's python, an environment without PYTHONPATH) with the freshly built wheel installed."""
    root = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    venv = root / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=120)
    if made.returncode != 0:
        pytest.skip(f"cannot create a virtual environment here (python -m venv: {made.stderr.strip()[-300:]})")
    source = root / "source"
    source.mkdir()
    shutil.copy2(REPO / "pyproject.toml", source / "pyproject.toml")
    shutil.copytree(REPO / "cvs_tasks", source / "cvs_tasks", ignore=shutil.ignore_patterns("__pycache__"))
    wheels = root / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(source)], root, env)
    (wheel,) = wheels.glob("cvs_tasks-*.whl")
    python = venv / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "-q", str(wheel)], root, env)
    return python, env


def test_a_wheel_install_lists_copies_and_loads_its_templates(wheel_venv, tmp_path):
    python, env = wheel_venv
    (tmp_path / "probe.py").write_text(PROBE, encoding="utf-8")
    work = tmp_path / "empty"
    work.mkdir()
    copied = json.loads(_run([str(python), str(tmp_path / "probe.py"), "copy"], work, env, timeout=120))

    site = python.parents[1]
    assert Path(copied["module"]).is_relative_to(site), copied["module"]
    assert copied["checkout"] == "None"
    assert copied["templates"] == [[t.kind, t.name, list(t.thresholds)] for t in list_templates()]
    assert [Path(p).name for p in copied["json"]] == [
        "mi3xx_megatron_llama-3.1-8b_single.json", "mi300x_megatron_llama-3.1-8b_single_threshold.json",
        "mi325x_megatron_llama-3.1-8b_single_threshold.json"]
    for written in copied["json"]:
        folder = "configs" if written.endswith("single.json") else "thresholds"
        assert (work / written).read_bytes() == (template_dir(folder) / Path(written).name).read_bytes()
    assert [Path(p).name for p in copied["toml"]] == [
        "mi355x_megatron_llama-3.1-8b_single.toml", "mi355x_megatron_llama-3.1-8b_single_threshold.toml"]
    assert "paths.hf_token_file: {cvs-root} means the cvs-tasks checkout" in copied["demo"]
    assert "installed from a wheel" in copied["demo"] and "pip install -e ." in copied["demo"]

    config = fill(work / "site" / "mi3xx_megatron_llama-3.1-8b_single.json")
    loaded = json.loads(_run([str(python), str(tmp_path / "probe.py"), "load", str(config)], work, env, timeout=120))
    assert loaded["combos"] == ["MBS=4,GBS=128,PRECISION=FP8", "MBS=4,GBS=128,PRECISION=BF16"]
    assert loaded["threshold"] == str(work / "site" / "mi300x_megatron_llama-3.1-8b_single_threshold.json")
    assert loaded["backend"] == "megatron"


def test_the_installed_console_script_works_from_any_folder(wheel_venv, tmp_path):
    """`cvs-tasks` (pyproject [project.scripts]) from an empty folder: the collection is built in, and a
    mistyped task is bad input (exit 2) with a suggestion, not invoke's exit 1."""
    python, env = wheel_venv
    script = python.parent / "cvs-tasks"
    assert script.is_file()
    work = tmp_path / "empty"
    work.mkdir()
    listed = subprocess.run([str(script), "config.list", "--filter", "llama-3.1-8b"], cwd=work, env=env,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "mi3xx_megatron_llama-3.1-8b_single.json" in listed.stdout, listed.stderr
    typo = subprocess.run([str(script), "trian"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert typo.returncode == 2 and "Did you mean `train`?" in typo.stderr, typo.stdout + typo.stderr
