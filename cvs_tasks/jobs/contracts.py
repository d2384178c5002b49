"""Refuse up front what a family's launcher script cannot do (launch_contracts.md).

A script that pins one node runs N independent single-node jobs when launched on N nodes; one
that passes `--exit-interval N` never trains past step N. Both would only show as wrong numbers
after the run, so they are config errors (exit 2) at load, naming the setting to change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cvs_tasks.config.errors import Problem, join_path
from cvs_tasks.jobs.families import megatron_family

if TYPE_CHECKING:
    from cvs_tasks.config import Suite


def contract_problems(suite: Suite, *, distributed: bool) -> list[Problem]:
    """Every combo (and the smoke cell) the Megatron-LM family script cannot run as configured."""
    if suite.backend != "megatron":
        return []
    problems: list[Problem] = []
    config = suite.config
    pinned: set[str] = set()
    for combo in suite.combos:
        params = combo.train_params
        if str(params.get("training_script", "")).strip():
            continue  # the user's own launcher: its contract is unknown
        family = megatron_family(str(params.get("tokenizer_model", "")))
        if family is None:
            continue
        script = family.script.rsplit("/", 1)[-1]
        if family.pins_one_node and distributed and family.name not in pinned:
            pinned.add(family.name)
            problems.append(("train_params.tokenizer_model", (
                f"{script} (the {family.name} launcher of Megatron-LM images) pins NNODES=1, NODE_RANK=0 and "
                "MASTER_ADDR=localhost: on several nodes it runs one independent single-node job per node, "
                "not one distributed run; use a *_single config, or a Primus image for a multi-node run")))
        limit = family.exit_interval
        iterations = str(params.get("training_iterations", ""))
        if limit and iterations.isdigit() and int(iterations) > limit:
            overlay = config.sweep.combinations.get(combo.id, {})
            where = (join_path(join_path("sweep.combinations", combo.id), "training_iterations")
                     if "training_iterations" in overlay else "train_params.training_iterations")
            if where not in {path for path, _ in problems}:
                problems.append((where, f"{iterations} iterations, but {script} passes --exit-interval {limit}: "
                                        f"training stops at step {limit}; set {limit} or fewer"))
        if limit and combo is suite.combos[0] and config.smoke.enabled and config.smoke.iters > limit:
            problems.append(("smoke.iters", f"{config.smoke.iters} iterations, but {script} passes "
                                            f"--exit-interval {limit}; set {limit} or fewer"))
    return problems
