"""The lifecycle in one table: every stage declared once, in the product's pinned order.

The order and the skip rules are the product's: docs/product.md#stages-and-their-order.

One row says everything the rest of the tool needs about a stage: its id (the record's name and
the test name ``test_<id>``), the Invoke command that runs it, the body that does the work, whether
it runs once per sweep combo, whether its failure skips every later stage, which stages must have
run first and, for a stage that only judges records, which stage's records it reads. From this
table come ``run_all``'s order, the skip rules, the generated Invoke tasks with their ``pre=`` lists
(``cvs_tasks.tasks.stages``) and the rows a report expects.

Adding a stage is one row here plus one body function (see ``tests/unit/lifecycle/test_stage_table.py``).
The body is named as ``"module:function"`` so this table stays in the run layer, below the
lifecycle code it points to (``lifecycle.flow.body_of`` resolves it).
"""

from __future__ import annotations

from dataclasses import dataclass


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


TABLE: tuple[Stage, ...] = (
    Stage("launch_container", "container", "launch", "cvs_tasks.lifecycle.setup_stages:launch_container",
          "Launch and verify the container on all hosts (test_launch_container).",
          blocks_later=True, combo_flag=True),
    Stage("download_tokenizer", "tokenizer", "download", "cvs_tasks.lifecycle.setup_stages:download_tokenizer",
          "Download tokenizer.model where the model family needs a local file (test_download_tokenizer).",
          blocks_later=True, needs=("launch_container",), combo_flag=True),
    Stage("smoke", "smoke", "run", "cvs_tasks.lifecycle.train_stages:smoke",
          "Run the smoke cell (test_smoke); skipped when smoke.enabled is false.",
          blocks_later=True, needs=("download_tokenizer",)),
    Stage("checkpoint", "checkpoint", "run", "cvs_tasks.lifecycle.train_stages:checkpoint",
          "Save, resume and compare the loss at the first resumed step (test_checkpoint; Primus only).",
          needs=("launch_container",)),
    Stage("training", "train", "run", "cvs_tasks.lifecycle.train_stages:training",
          "Train the selected combos (all of sweep.runs by default) and record their results.",
          per_combo=True, needs=("smoke",)),
    Stage("metric", "metric", "check", "cvs_tasks.lifecycle.gate_stages:metric",
          "PASS/FAIL per metric from the recorded training result (test_metric).",
          per_combo=True, needs=("training",), reads="training"),
    Stage("loss_curve", "loss", "check", "cvs_tasks.lifecycle.gate_stages:loss_curve",
          "Least-squares slope of the sampled loss curve vs loss_curve.max_slope (test_loss_curve).",
          per_combo=True, needs=("training",), reads="training"),
    Stage("teardown", "teardown", "run", "cvs_tasks.lifecycle.setup_stages:teardown",
          "Tear the container down on every node and delete the run's scripts and token file (test_teardown).",
          last=True, checks_config=False),
)


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
