"""The lifecycle in one table: every stage declared once, in the product's pinned order.

The order and the skip rules are the product's: docs/product.md#stages-and-their-order.

One row says everything the rest of the tool needs about a stage: its id (the record's name and
the test name ``test_<id>``), the Invoke command that runs it, the body that does the work, whether
it runs once per sweep combo, whether its failure skips every later stage, which stages must have
run first, for a stage that only judges records which stage's records it reads, what it does to
the container, whether its jobs leave per-node logs, and what the report tells the user to do when
it fails. From this table come ``run_all``'s order, the skip rules, the generated Invoke tasks with
their ``pre=`` lists (``cvs_tasks.tasks.lifecycle``) and the rows a report expects.

Every row is also a module constant (``TRAINING``, ``LAUNCH_CONTAINER``, ...): code names a stage
as ``TRAINING.id``, never by writing its id (``tests/unit/lifecycle/test_stage_ids_declared.py``).
Adding a stage is one row here plus one body function (see ``tests/unit/lifecycle/test_stage_table.py``).
The body is named as ``"module:function"`` so this table stays in the run layer, below the
lifecycle code it points to (``lifecycle.flow.body_of`` resolves it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ContainerEffect = Literal["", "up", "down"]


@dataclass(frozen=True)
class Stage:
    id: str  # record and test name: test_<id>[<combo>]
    task: str  # Invoke namespace: `invoke <task>`
    task_name: str  # its default task: `invoke <task>.<task_name>`
    body: str  # "module:function(session, combo) -> StageRecord"
    help: str  # the task's help line
    per_combo: bool = False  # one record per sweep combo
    blocks_later: bool = False  # a failure skips every later stage (the early stages)
    needs: tuple[str, ...] = ()  # prerequisites: stages `invoke <task>` runs first (pre-tasks)
    reads: str | None = None  # a judging stage: the stage whose records it reads
    combo_flag: bool = False  # takes --combo though not per combo: run only if one of them has to train
    last: bool = False  # runs last in `invoke all`, always (also after a failure or an interrupt)
    checks_config: bool = True  # refuse to act when the config changed since the run started
    # what it does to the run's container: "up" brings it up (rerun whenever it is not up), "down"
    # takes it down (rerun whenever it is up again since); the two rows say whether it is up now
    container: ContainerEffect = ""
    node_logs: bool = False  # its jobs write per-node training logs: logs/<stage>/<combo-dir>/out-node<N>/
    hint: str = ""  # what the report says to do when it fails and its record names no signature hint


LAUNCH_CONTAINER = Stage(
    "launch_container", "container", "launch", "cvs_tasks.lifecycle.setup_stages:launch_container",
    "Launch and verify the container on all hosts (test_launch_container).",
    blocks_later=True, combo_flag=True, container="up",
    hint="the container did not come up: `invoke cluster.check --cluster ... --config ...` "
         "shows per node what is missing")
DOWNLOAD_TOKENIZER = Stage(
    "download_tokenizer", "tokenizer", "download", "cvs_tasks.lifecycle.setup_stages:download_tokenizer",
    "Download tokenizer.model where the model family needs a local file (test_download_tokenizer).",
    blocks_later=True, needs=(LAUNCH_CONTAINER.id,), combo_flag=True)
SMOKE = Stage(
    "smoke", "smoke", "run", "cvs_tasks.lifecycle.train_stages:smoke",
    "Run the smoke cell (test_smoke); skipped when smoke.enabled is false.",
    blocks_later=True, needs=(DOWNLOAD_TOKENIZER.id,), node_logs=True)
CHECKPOINT = Stage(
    "checkpoint", "checkpoint", "run", "cvs_tasks.lifecycle.train_stages:checkpoint",
    "Save, resume and compare the loss at the first resumed step (test_checkpoint; Primus only).",
    needs=(LAUNCH_CONTAINER.id,), node_logs=True)
TRAINING = Stage(
    "training", "train", "run", "cvs_tasks.lifecycle.train_stages:training",
    "Train the selected combos (all of sweep.runs by default) and record their results.",
    per_combo=True, needs=(SMOKE.id,), node_logs=True)
METRIC = Stage(
    "metric", "metric", "check", "cvs_tasks.lifecycle.gate_stages:metric",
    "PASS/FAIL per metric from the recorded training result (test_metric).",
    per_combo=True, needs=(TRAINING.id,), reads=TRAINING.id,
    hint="a gate failed: the metric table shows actual vs expected; `invoke compare` against a "
         "passing run shows what changed")
LOSS_CURVE = Stage(
    "loss_curve", "loss", "check", "cvs_tasks.lifecycle.gate_stages:loss_curve",
    "Least-squares slope of the sampled loss curve vs loss_curve.max_slope (test_loss_curve).",
    per_combo=True, needs=(TRAINING.id,), reads=TRAINING.id,
    hint="the loss did not fall as configured (loss_curve in the config): look at the loss plot "
         "and the first steps of the log")
TEARDOWN = Stage(
    "teardown", "teardown", "run", "cvs_tasks.lifecycle.setup_stages:teardown",
    "Tear the container down on every node and delete the run's scripts and token file (test_teardown).",
    last=True, checks_config=False, container="down",
    hint="containers or node files may be left: `invoke cleanup --cluster ...` finds and removes them")

TABLE: tuple[Stage, ...] = (
    LAUNCH_CONTAINER, DOWNLOAD_TOKENIZER, SMOKE, CHECKPOINT, TRAINING, METRIC, LOSS_CURVE, TEARDOWN,
)

# The record `invoke diagnose` (and diagnose.auto after a failed run) writes: a record and a report
# row like a stage's, but not a lifecycle row (it runs on request, on each node on its own).
DIAGNOSE = "diagnose"


def table() -> tuple[Stage, ...]:
    """The stages in lifecycle order (read at call time, so a test can register a stage)."""
    return TABLE


def stage(stage_id: str) -> Stage:
    for row in table():
        if row.id == stage_id:
            return row
    raise KeyError(f"no stage {stage_id!r}: the stages are {', '.join(r.id for r in table())}")


def stage_ids() -> tuple[str, ...]:
    return tuple(r.id for r in table())


def per_combo_ids() -> frozenset[str]:
    return frozenset(r.id for r in table() if r.per_combo)


def blocking_ids() -> tuple[str, ...]:
    """The early stages, in order: a failure of one skips every stage after it."""
    return tuple(r.id for r in table() if r.blocks_later)


def node_log_ids() -> frozenset[str]:
    """The stages whose jobs write per-node training logs."""
    return frozenset(r.id for r in table() if r.node_logs)


def container_stage(effect: ContainerEffect) -> Stage:
    """The row that brings the container ``"up"`` or takes it ``"down"``."""
    return next(r for r in table() if r.container == effect)


def hint(stage_id: object) -> str:
    """The table's hint for a failed row of ``stage_id`` ("" for a record no row declares)."""
    return next((r.hint for r in table() if r.id == stage_id), "")
