"""Stage ids are written once, in the stage table (``cvs_tasks/run/stages.py``); code names a stage
by its row (``TRAINING.id``), never by writing its id, so renaming or adding a stage cannot leave
a comparison behind.

The scan reads every module of ``cvs_tasks/`` as Python (``ast``), so comments and docstrings do
not count, and flags every string constant equal to a stage id, except where the word is a field
name of data rather than a stage: a dict display key, a subscript (``cfg["checkpoint"]``) and the
key of ``.get``/``.pop``/``.setdefault`` (a config section, a view-model or JSON field). A few uses
of the same words with another meaning are listed in ``ELSEWHERE`` with the reason.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from cvs_tasks.run import stages

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "cvs_tasks"
DECLARATION = PACKAGE / "run" / "stages.py"

# (file, word) -> how many times the word appears there meaning something else than a stage
ELSEWHERE: dict[tuple[str, str], tuple[int, str]] = {
    ("cvs_tasks/config/thresholds.py", "training"): (1, "the first part of a metric name read as a TOML table"),
    ("cvs_tasks/history/commands.py", "metric"): (1, "a column header of `invoke compare`"),
    ("cvs_tasks/report/html.py", "metric"): (2, "the word in 'N metrics' and a row label of the combo card"),
    ("cvs_tasks/report/html.py", "training"): (1, "a row label of the combo card"),
    ("cvs_tasks/metrics/checkpoint.py", "checkpoint"): (1, "a word searched for in log lines"),
    ("cvs_tasks/metrics/__init__.py", "checkpoint"): (2, "the module metrics.checkpoint, loaded on first use"),
}

KEY_METHODS = frozenset({"get", "pop", "setdefault"})


def declared_ids() -> frozenset[str]:
    return frozenset(stages.stage_ids()) | {stages.DIAGNOSE}


def _exempt(tree: ast.AST) -> set[int]:
    """The string constants that are docstrings or data keys (see the module docstring)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
        elif isinstance(node, ast.Dict):
            out.update(id(k) for k in node.keys if k is not None)
        elif isinstance(node, ast.Subscript):
            out.add(id(node.slice))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in KEY_METHODS and node.args):
            out.add(id(node.args[0]))
    return out


def stage_id_literals(source: str, ids: frozenset[str]) -> list[tuple[int, str]]:
    """(line, id) of every stage id written as a string in ``source`` outside docstrings and data keys."""
    tree = ast.parse(source)
    exempt = _exempt(tree)
    found = [(node.lineno, node.value) for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in ids
             and id(node) not in exempt]
    return sorted(found)


def test_no_module_writes_a_stage_id_outside_the_stage_table():
    ids = declared_ids()
    problems, seen = [], Counter()
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == DECLARATION:
            continue
        rel = str(path.relative_to(ROOT))
        for line, word in stage_id_literals(path.read_text(encoding="utf-8"), ids):
            if (rel, word) in ELSEWHERE:
                seen[(rel, word)] += 1
            else:
                problems.append(f"{rel}:{line}: {word!r} (name the stage by its row in cvs_tasks/run/stages.py)")
    assert not problems, "stage ids written outside the stage table:\n" + "\n".join(problems)
    for key, (count, why) in ELSEWHERE.items():
        assert seen[key] == count, f"{key}: expected {count} use(s) ({why}), found {seen[key]}: update ELSEWHERE"


def test_the_scan_names_a_planted_stage_id_and_leaves_docstrings_comments_and_data_keys_alone():
    source = '''"""Talks about the training stage: "training"."""
import x
# "training" in a comment
def judge(rec, cfg):
    """A docstring saying "metric"."""
    if rec.stage == "training":
        return cfg["checkpoint"], cfg.get("smoke"), {"metric": 1}
    return x.read_record("loss_curve", None)
'''
    assert stage_id_literals(source, declared_ids()) == [(6, "training"), (8, "loss_curve")]


def test_the_table_declares_every_id_the_scan_looks_for():
    ids = declared_ids()
    assert {"launch_container", "teardown", "training", "diagnose"} <= ids
    assert all(isinstance(getattr(stages, row.id.upper()), stages.Stage) for row in stages.table())
