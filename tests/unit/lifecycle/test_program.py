"""The `cvs-tasks` console script: this collection from any folder, and exit statuses a script can
trust (README, "Exit statuses"): an unknown task or flag is bad input (2) with a did-you-mean, not
invoke's 1, the status of a failed gate."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from cvs_tasks.tasks.program import did_you_mean, parse_error_text

REPO = Path(__file__).resolve().parents[3]
TASKS = ["train", "train.run", "metric", "metric.check", "teardown", "config.validate", "cluster.check"]


def console_script(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`cvs-tasks ARGS` as the installed script runs it: the pyproject entry point's function, argv[0]
    `cvs-tasks`, from ``cwd`` (no tasks.py, no invoke.yaml there)."""
    entry = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]["cvs-tasks"]
    module, _, function = entry.partition(":")
    script = f"import sys; sys.argv[0] = 'cvs-tasks'; from {module} import {function}; sys.exit({function}())"
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="160")
    return subprocess.run([sys.executable, "-c", script, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("typed, meant", [("trian", "train"), ("metrc", "metric"), ("teardwon", "teardown"),
                                          ("config.validte", "config.validate")])
def test_a_mistyped_task_gets_the_closest_name(typed, meant):
    assert did_you_mean(typed, TASKS) == meant


def test_nothing_close_suggests_nothing():
    assert did_you_mean("zzzz", TASKS) is None
    assert parse_error_text("No idea what 'zzzz' is!", None, TASKS, []) == \
        "cvs-tasks: unknown task 'zzzz'. (`cvs-tasks --help` lists every task)"


def test_a_mistyped_flag_is_matched_against_that_tasks_flags():
    text = parse_error_text("No idea what '--comb' is!", "train.run", TASKS, ["--combo", "-o", "--config", "-c"])
    assert text == "cvs-tasks: unknown flag '--comb'. Did you mean `--combo`? (`cvs-tasks --help train.run` shows " \
                   "its flags)"
    assert "Did you mean `--combo`" in parse_error_text("No idea what '--comb=A' is!", "train.run", TASKS, ["--combo"])


def test_other_parse_errors_are_kept_as_invoke_words_them():
    text = parse_error_text("Flag <Argument: config (c)> needed value and was not given one!", "train.run", TASKS, [])
    assert text.startswith("Flag <Argument: config (c)> needed value") and "--help train.run" in text


def test_the_console_script_refuses_a_typo_with_exit_2_from_any_folder(tmp_path):
    typo = console_script("trian", cwd=tmp_path)
    assert typo.returncode == 2, typo.stdout + typo.stderr
    assert "Did you mean `train`?" in typo.stderr and "Traceback" not in typo.stderr
    flag = console_script("train", "--comb", "MBS=2,GBS=16,PRECISION=BF16", cwd=tmp_path)
    assert flag.returncode == 2 and "Did you mean `--combo`?" in flag.stderr, flag.stderr
    helped = console_script("--help", "trian", cwd=tmp_path)
    assert helped.returncode == 2 and "Did you mean `train`?" in helped.stderr


def test_the_console_script_has_the_collection_and_its_executor(tmp_path):
    """From an empty folder: the tasks are there, and a chain's flags reach every task (the executor is
    built in, not read from the checkout's invoke.yaml)."""
    listed = console_script("--list", cwd=tmp_path)
    assert listed.returncode == 0 and "train" in listed.stdout and "config.validate" in listed.stdout
    conflict = console_script("container", "--config", "a.json", "smoke", "--config", "b.json", cwd=tmp_path)
    assert conflict.returncode == 2 and "given twice with different values" in conflict.stderr, conflict.stderr
    missing = console_script("train", "--config", "x.json", cwd=tmp_path)
    assert missing.returncode == 2 and missing.stderr.startswith("--config x.json: config file not found"), \
        missing.stderr


def test_invoke_keeps_its_own_parse_errors():
    """`invoke` in the checkout stays invoke: its parse errors exit 1, as the README says."""
    done = subprocess.run([sys.executable, "-m", "invoke", "trian"], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120)
    assert done.returncode == 1 and "No idea what 'trian' is!" in done.stderr
