"""A dry run is one mechanism below the stages: the session's hosts print each command instead of
running it (``lifecycle.static_nodes.DryRunNodes`` -> ``remote.dryrun.DryRunHosts``) and its run directory
keeps its records in memory (``run.rundir.DryRunDir``). No stage body asks whether it is a dry run;
the few places above the transport that do are listed here, each with its reason, so a new branch
is a decision, not a habit."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from cvs_tasks.run import stages

ROOT = Path(__file__).resolve().parents[3]
LIFECYCLE = ROOT / "cvs_tasks" / "lifecycle"

# module -> (reads of `.dry_run`, why)
ASKED = {
    "session.py": (6, "open_session turns the request's flag into a DryRunDir (a scratch one for a new run) and "
                      "DryRunNodes, and checks readiness without asking a node"),
    "flow.py": (2, "chained dry-run tasks print each stage once; diagnose.auto never runs in a dry run"),
    "jobrun.py": (1, "a job is shown (wrapper scripts and launch lines as written) instead of started"),
    "diagnose.py": (1, "a node's one-node session is a copy of the run's"),
}


def _reads(path: Path) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sum(isinstance(node, ast.Attribute) and node.attr == "dry_run" for node in ast.walk(tree))


def test_no_stage_body_asks_whether_it_is_a_dry_run():
    bodies = {row.body.partition(":")[0] for row in stages.table()}
    for module in sorted(bodies):
        path = ROOT / (module.replace(".", "/") + ".py")
        assert _reads(path) == 0 and "dry_run" not in path.read_text(encoding="utf-8"), module


def test_only_the_listed_lifecycle_modules_ask_and_only_as_often_as_listed():
    found = Counter({path.name: _reads(path) for path in LIFECYCLE.glob("*.py") if _reads(path)})
    expected = Counter({name: count for name, (count, _why) in ASKED.items() if count})
    assert found == expected, "a new dry-run branch: make the transport or the run directory answer instead"
