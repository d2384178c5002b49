"""The stage table is the lifecycle: its invariants, and adding a stage as one row plus one body."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cvs_tasks.lifecycle.flow import body_of, run_all
from cvs_tasks.lifecycle.session import RunRequest, open_session
from cvs_tasks.report.results import expected_keys
from cvs_tasks.run import StageRecord, stages
from cvs_tasks.run.events import StageEvent

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "configs" / "testbed" / "demo_host.json"
LOCAL = ROOT / "cluster" / "localhost.json"


def test_the_shipped_table_is_the_product_documents_order():
    assert stages.stage_ids() == ("launch_container", "download_tokenizer", "smoke", "checkpoint", "training",
                                  "metric", "loss_curve", "teardown")
    assert stages.blocking_ids() == ("launch_container", "download_tokenizer", "smoke")
    assert stages.per_combo_ids() == {"training", "metric", "loss_curve"}


def test_every_row_is_consistent():
    seen: set[str] = set()
    rows = stages.table()
    for row in rows:
        assert row.id not in seen, f"duplicate stage {row.id}"
        assert set(row.needs) <= seen, f"{row.id} needs a stage that is not an earlier row"
        assert row.reads is None or row.reads in seen
        assert callable(body_of(row.id)), row.body
        seen.add(row.id)
    assert [r.last for r in rows] == sorted(r.last for r in rows), "the `last` stages end the table"
    assert len({r.task for r in rows}) == len(rows), "one Invoke namespace per stage"
    assert sorted(r.container for r in rows if r.container) == ["down", "up"], "one row brings it up, one down"
    assert stages.container_stage("up").id == "launch_container" and stages.container_stage("down").last
    assert stages.node_log_ids() == {"smoke", "checkpoint", "training"}
    assert stages.hint("metric") and stages.hint("no such stage") == ""


def hello(session, combo):
    """The throw-away stage's body: judges nothing, records that it ran."""
    return StageRecord.result("PASS", "hello from a stage added in one row")  # the runner stamps its id


@pytest.fixture
def with_hello(monkeypatch):
    row = stages.Stage("hello", "hello", "run", f"{__name__}:hello", "Say hello after the smoke test.",
                       needs=("smoke",))
    table = list(stages.TABLE)
    table.insert(stages.stage_ids().index("smoke") + 1, row)
    monkeypatch.setattr(stages, "TABLE", tuple(table))
    return row


def test_a_new_stage_is_one_row_and_one_body(with_hello):
    from cvs_tasks.tasks import namespace

    ns = namespace()
    hello_task = ns["hello"]
    assert hello_task.__doc__ == "Say hello after the smoke test."
    assert [p.cvs_stage for p in hello_task.pre] == ["smoke"]
    assert "combo" not in [a.name for a in hello_task.get_arguments()]

    keys = expected_keys(["A"], [])
    assert keys.index(("hello", None)) == keys.index(("smoke", None)) + 1  # the report expects its row

    seen: list[str] = []

    def listen(event):
        if isinstance(event, StageEvent) and event.status is None:
            seen.append(event.stage)

    session = open_session(RunRequest(config=str(DEMO), cluster=str(LOCAL), dry_run=True, new=True),
                           listener=listen)
    try:
        assert run_all(session) == 0
    finally:
        session.close()
    assert seen.index("hello") == seen.index("smoke") + 1 and seen[-1] == "teardown"


def test_a_stage_needing_a_later_one_is_refused(monkeypatch):
    from cvs_tasks.tasks.lifecycle import stage_collections

    broken = dataclasses.replace(stages.TABLE[0], needs=("teardown",))
    monkeypatch.setattr(stages, "TABLE", (broken, *stages.TABLE[1:]))
    with pytest.raises(ValueError, match="not earlier rows"):
        stage_collections()


def test_generated_stage_tasks_are_distinct_for_invokes_deduplication():
    """Invoke merges equal calls (same name and body code): `metric.check` and `loss.check`,
    or the four `*.run` tasks, must never compare equal."""
    from cvs_tasks.tasks.lifecycle import stage_collections

    made = [c.tasks[c.default] for c in stage_collections()]
    for i, first in enumerate(made):
        for second in made[i + 1:]:
            assert first != second, (first.cvs_stage, second.cvs_stage)
