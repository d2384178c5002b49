"""Refuse up front what a family's launcher script cannot do (docs/launch_contracts.md).

A script that pins one node runs N independent single-node jobs when launched on N nodes; one
that passes `--exit-interval N` never trains past step N. Both would only show as wrong numbers
after the run, so they are config errors (exit 2) at load, naming the setting to change.

What differs between images (which env names the script reads, how many RDMA links a node has)
is asked of the image and the nodes (``launcher_probe``): ``launcher_needs`` says what to ask,
``launcher_findings`` turns the answer into problems (exit 2) and warnings (could not tell).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cvs_tasks import backends
from cvs_tasks.config.errors import Problem, join_path
from cvs_tasks.families import Family, megatron_family, normalise_precision
from cvs_tasks.jobs.launcher_probe import ProbeAnswer
from cvs_tasks.jobs.spec import PARAM_DEFAULTS

if TYPE_CHECKING:
    from cvs_tasks.config import Suite


def contract_problems(suite: Suite, *, distributed: bool) -> list[Problem]:
    """What the suite's backend refuses at load (``Backend.contract_problems``)."""
    return backends.get(suite.backend).contract_problems(suite, distributed=distributed)


def launcher_needs(suite: Suite, *, distributed: bool) -> list[Need]:
    """What the suite's backend asks the image and the nodes before a run (``Backend.launcher_needs``)."""
    return backends.get(suite.backend).launcher_needs(suite, distributed=distributed)


def family_contract_problems(suite: Suite, *, distributed: bool) -> list[Problem]:
    """Every combo (and the smoke cell) the Megatron-LM family script cannot run as configured."""
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


@dataclass(frozen=True)
class Need:
    """One thing the image or the nodes must confirm before the run; ``refuse`` False: a warning."""

    where: str  # the setting that asks for it (dotted path)
    script: str  # the launcher's path in the image
    name: str = ""  # an env name the script must read
    links: int = 0  # active RDMA links every node must have
    refuse: bool = True
    otherwise: str = ""  # what happens when it does not hold


def family_launcher_needs(suite: Suite, *, distributed: bool) -> list[Need]:
    """What the combos (and the smoke cell) of a Megatron-LM suite need of their family launcher."""
    config = suite.config
    needs: list[Need] = []
    for combo in suite.combos:
        params = combo.train_params
        family = megatron_family(str(params.get("tokenizer_model", "")))
        if family is None or str(params.get("training_script", "")).strip():
            continue  # the user's own launcher: its contract is unknown
        root = str(params.get("megatron_root") or PARAM_DEFAULTS["megatron_root"]).rstrip("/")
        script = f"{root}/{family.script}"
        cells = [(_precision_where(config, combo), combo.precision)]
        if combo is suite.combos[0] and config.smoke.enabled:
            cells.append(("smoke.precision", config.smoke.precision))
        for where, precision in cells:
            need = _precision_need(family, script, where, precision)
            if need:
                needs.append(need)
        if distributed and family.data_cache_var:
            needs.append(Need("paths.data_cache_dir", script, family.data_cache_var, refuse=False, otherwise=(
                "paths.data_cache_dir is not used: each node builds the dataset index cache in the script's own "
                "default folder (the Feb-2025 ROCm Megatron-LM script does this). With mock data nothing changes; "
                "with real data, keep the data and its cache on storage every node shares, or use a newer image")))
        if family.rdma_links:
            needs.append(Need("train_params.tokenizer_model", script, links=family.rdma_links, otherwise=(
                f"reads {family.rdma_links} RDMA links (links[i] for i in range({family.rdma_links})) and, under "
                "`set -e`, exits before torchrun on a node with fewer: nothing trains")))
    return list(dict.fromkeys(needs))


def _precision_where(config, combo) -> str:
    if combo.id in config.sweep.combinations:
        return join_path("sweep.combinations", combo.id)
    return "train_params.precision"


def _precision_need(family: Family, script: str, where: str, precision: str) -> Need | None:
    key = normalise_precision(precision)
    if key not in family.precision_needs:
        return None
    name, instead = family.precision_needs[key]
    return Need(where, script, name, otherwise=(
        f"{key} is selected by {name}, which only the 2026 ROCm Megatron-LM scripts read: this one would train "
        f"{instead} and the run would be reported as {key}; use an image whose "
        f"{family.script.rsplit('/', 1)[-1]} reads {name}, or drop {key} from the sweep"))


def scripts_to_probe(needs: list[Need]) -> dict[str, tuple[str, ...]]:
    """Script path -> the env names to ask it about (the probe's question)."""
    out: dict[str, tuple[str, ...]] = {}
    for need in needs:
        if need.name:
            out[need.script] = tuple(dict.fromkeys((*out.get(need.script, ()), need.name)))
    return out


def launcher_findings(needs: list[Need], answer: ProbeAnswer) -> tuple[list[Problem], list[str]]:
    """Problems (the run would not train what the config says: exit 2) and warnings (it could
    not be told, or the run still trains what was asked), every one at once."""
    problems: list[Problem] = []
    warnings: list[str] = []
    for need in needs:
        script = need.script.rsplit("/", 1)[-1]
        if need.links:
            for node, count in answer.links.items():
                if count is None:
                    warnings.append(f"cannot count the active RDMA links on node {node} (ibv_devinfo gave no "
                                    f"device list): {script} {need.otherwise}; check `ibv_devinfo` on that node")
                elif count < need.links:
                    problems.append((need.where, f"node {node} has {count} active RDMA link(s) (ibv_devinfo), "
                                     f"but {script} {need.otherwise}; run it on nodes with {need.links} active RDMA "
                                     "ports, or use a Primus image"))
            continue
        facts = answer.scripts.get(need.script)
        if facts is None:
            why = answer.unknown or "no answer from node 0"
            warnings.append(f"{need.where}: not checked whether {need.script} reads {need.name} ({why}); if it "
                            f"does not: {need.otherwise}")
        elif not facts.present:
            warnings.append(f"{need.where}: {need.script} is not in the image (train_params.megatron_root?); "
                            f"whether it reads {need.name} was not checked")
        elif need.name in facts.ignores:
            text = f"{need.script} in this image does not read {need.name}: {need.otherwise}"
            if need.refuse:
                problems.append((need.where, text))
            else:
                warnings.append(f"{need.where}: {text}")
        elif need.name not in facts.reads:
            warnings.append(f"{need.where}: the answer about {need.script} does not say whether it reads "
                            f"{need.name}; if it does not: {need.otherwise}")
    return list(dict.fromkeys(problems)), list(dict.fromkeys(warnings))
