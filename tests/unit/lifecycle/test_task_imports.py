"""Invoke imports every task module to parse any command line: they must stay light, so
`invoke --list`, `--help` and a refused flag answer at once (docs/design.md, "Task modules import the
library when a task runs")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
HEAVY = ("paramiko", "fabric", "pydantic", "jinja2", "rich", "cvs_tasks.lifecycle", "cvs_tasks.config",
         "cvs_tasks.remote", "cvs_tasks.metrics", "cvs_tasks.report")


def test_loading_the_tasks_imports_no_library_layer():
    probe = ("import sys, tasks; tasks.ns.task_names; "
             "print('\\n'.join(sorted(m for m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY or any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert heavy == [], f"loading the tasks imported {heavy}: import them inside the task body"


def test_a_hostile_run_flag_is_refused_before_the_lifecycle_loads():
    probe = ("import sys\nfrom invoke import Program\nimport tasks\n"
             "try:\n    Program(namespace=tasks.ns).run(['invoke', 'all', '--dry-run', '--run', 'a/..'])\n"
             "except SystemExit as exc:\n    print('exit', exc.code)\n"
             "print('lifecycle' if 'cvs_tasks.lifecycle.flow' in sys.modules else 'light')\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.stdout.split("\n")[-3:-1] == ["exit 2", "light"], done.stdout + done.stderr
    assert "--run 'a/..'" in done.stderr
