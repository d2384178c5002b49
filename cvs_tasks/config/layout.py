"""The batch / parallel layout every combo and the smoke cell will train with, checked at load.

Megatron asserts `GBS % (MBS x DP) == 0` with DP = world / (TP x PP x CP) and needs TP x PP x CP
to divide the world size; a cell that breaks either stops seconds after launch and, for the smoke
cell, skips every later stage. Checking here turns that into a config error (exit 2) that names
the file, the dotted path and a value that fits. Pure: config and world size in, problems out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cvs_tasks.config.errors import ConfigError, Problem, join_path
from cvs_tasks.config.sweep import DEFAULT_COMBO, Combo
from cvs_tasks.identifiers import is_ascii_positive_int

if TYPE_CHECKING:
    from cvs_tasks.config.load import Suite
    from cvs_tasks.config.models import SuiteConfig

PARALLEL_PARAMS = (("TP", "tensor_parallelism"), ("PP", "pipeline_parallelism"), ("CP", "context_parallelism"))


@dataclass(frozen=True)
class Layout:
    """The sizes Megatron derives its data-parallel degree from."""

    nnodes: int
    gpus_per_node: int
    tp: int
    pp: int
    cp: int = 1

    @property
    def world(self) -> int:
        return self.nnodes * self.gpus_per_node

    @property
    def model_parallel(self) -> int:
        return self.tp * self.pp * self.cp

    @property
    def dp(self) -> int | None:
        """Data-parallel degree, or None when the model-parallel size does not divide the world."""
        return self.world // self.model_parallel if self.world % self.model_parallel == 0 else None

    def describe(self) -> str:
        cp = f" x CP {self.cp}" if self.cp != 1 else ""
        return f"{self.world} GPUs ({self.nnodes} node(s) x {self.gpus_per_node}) / (TP {self.tp} x PP {self.pp}{cp})"


def combo_layout(combo: Combo, nnodes: int, gpus_per_node: int) -> Layout:
    """The layout of one combo (missing or unreadable sizes count as 1; the sweep reports those)."""
    sizes = [_size(combo.train_params.get(name, "1")) for _, name in PARALLEL_PARAMS]
    return Layout(nnodes, gpus_per_node, *sizes)


def smoke_global_batch(mbs: str, layout: Layout) -> str:
    """The smoke GBS when smoke.global_batch_size is empty: one micro batch per data-parallel rank
    (MBS x DP), the smallest batch Megatron accepts on this cluster (8 on one 8-GPU node, 24 on 3)."""
    dp = layout.dp or layout.world
    return str(_size(mbs) * max(1, dp))


def layout_problems(config: SuiteConfig, combos: list[Combo], nnodes: int) -> list[Problem]:
    """Every layout problem of the combos and the smoke cell on `nnodes` nodes, each at its path."""
    if nnodes < 1 or not combos:
        return []
    gpus = config.gpus_per_node
    problems: list[Problem] = []
    reported_parallel: set[str] = set()
    for combo in combos:
        layout = combo_layout(combo, nnodes, gpus)
        where = _combo_path(combo)
        if layout.dp is None:
            path = _param_path(config, combo, "tensor_parallelism")
            if path not in reported_parallel:
                reported_parallel.add(path)
                problems.append((path, _parallel_message(layout, combo.id)))
            continue
        problem = _batch_problem(combo.mbs, combo.gbs, layout, "MBS and GBS in the key" if combo.id != DEFAULT_COMBO
                                 else "micro_batch_size / global_batch_size")
        if problem:
            problems.append((where if combo.id != DEFAULT_COMBO else "train_params.global_batch_size", problem))
    if config.smoke.enabled:
        problems += _smoke_problems(config, combos[0], nnodes)
    return problems


def check_layout(suite: Suite, nnodes: int) -> None:
    """Raise one ConfigError (exit 2) listing every layout problem of the suite on `nnodes` nodes."""
    problems = layout_problems(suite.config, suite.combos, nnodes)
    if problems:
        raise ConfigError(suite.config_path, problems)


def _smoke_problems(config: SuiteConfig, first: Combo, nnodes: int) -> list[Problem]:
    smoke = config.smoke
    layout = combo_layout(first, nnodes, config.gpus_per_node)
    if layout.dp is None:
        return []  # reported on the combo it takes TP/PP from
    mbs = smoke.micro_batch_size or "1"
    gbs = smoke.global_batch_size or smoke_global_batch(mbs, layout)
    problem = _batch_problem(mbs, gbs, layout, "smoke.micro_batch_size / smoke.global_batch_size")
    if problem is None:
        return []
    hint = " or leave smoke.global_batch_size empty to derive it from the cluster"
    path = "smoke.global_batch_size" if smoke.global_batch_size else "smoke.micro_batch_size"
    return [(path, f"smoke cell (TP/PP of {first.id!r}): {problem}{hint}")]


def _batch_problem(mbs_text: str, gbs_text: str, layout: Layout, names: str) -> str | None:
    if not (is_ascii_positive_int(mbs_text) and is_ascii_positive_int(gbs_text)) or layout.dp is None:
        return None  # the sweep / model checks report unreadable sizes
    mbs, gbs, dp = int(mbs_text), int(gbs_text), layout.dp
    step = mbs * dp
    if gbs % step == 0:
        return None
    fit = max(step, (gbs // step) * step)
    return (f"GBS {gbs} is not a multiple of MBS x DP = {mbs} x {dp} = {step} "
            f"(DP = {layout.describe()}); Megatron stops at start on this; set {names} so GBS is a "
            f"multiple of {step} (e.g. GBS {fit})")


def _parallel_message(layout: Layout, combo_id: str) -> str:
    fitting = [n for n in range(1, 65) if (n * layout.gpus_per_node) % layout.model_parallel == 0][:1]
    nodes = f"; or run it on {fitting[0]} node(s)" if fitting else ""
    return (f"combo {combo_id!r}: TP {layout.tp} x PP {layout.pp}"
            f"{f' x CP {layout.cp}' if layout.cp != 1 else ''} = {layout.model_parallel} does not divide "
            f"the {layout.world} GPUs ({layout.nnodes} node(s) x {layout.gpus_per_node}); choose sizes whose "
            f"product divides {layout.world}{nodes}")


def _combo_path(combo: Combo) -> str:
    return join_path("sweep.combinations", combo.id)


def _param_path(config: SuiteConfig, combo: Combo, name: str) -> str:
    overlay = config.sweep.combinations.get(combo.id, {})
    for _, param in PARALLEL_PARAMS:
        if param in overlay:
            return join_path(_combo_path(combo), param)
    return join_path("train_params", name)


def _size(text: str) -> int:
    text = str(text).strip()
    return int(text) if is_ascii_positive_int(text) else 1
