"""Primus mem_usage: recorded, not gated by the shipped (optional) spec; an explicit cell gates it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cvs_tasks.config import ThresholdSpec, load_threshold_file
from cvs_tasks.judge.kinds import evaluate
from cvs_tasks.judge.memory import METRIC, explain, ungated_specs

REPO = Path(__file__).resolve().parents[3]
SHIPPED = {METRIC: ThresholdSpec(kind="max", value=0.85, optional=True),
           "training.throughput_per_gpu": ThresholdSpec(kind="min", value=100)}


def judged(cell, backend, mem):
    cell, names = ungated_specs(cell, backend)
    rows = explain(evaluate({METRIC: mem, "training.throughput_per_gpu": 500.0}, cell, True), names)
    return {r.name: r for r in rows}


def test_primus_memory_over_the_shipped_bound_is_recorded_not_failed():
    row = judged(SHIPPED, "primus", 0.97)[METRIC]
    assert (row.status, row.value, row.expected) == ("RECORD", 0.97, "info (0.85)")
    assert "not gated" in row.reason and '"optional": false' in row.reason


def test_megatron_memory_is_still_gated_by_the_same_spec():
    assert judged(SHIPPED, "megatron", 0.97)[METRIC].status == "FAIL"
    assert judged(SHIPPED, "megatron", 0.50)[METRIC].status == "PASS"


def test_the_document_case_primus_without_a_value_is_skipped():
    row = judged(SHIPPED, "primus", None)[METRIC]
    assert row.status == "SKIPPED" and row.reason == "no value produced this run"


@pytest.mark.parametrize("mem, status", [(0.97, "FAIL"), (0.5, "PASS")])
def test_a_cell_that_writes_optional_false_gates_primus_memory(mem, status):
    explicit = {**SHIPPED, METRIC: ThresholdSpec(kind="max", value=0.85, optional=False)}
    assert judged(explicit, "primus", mem)[METRIC].status == status


def test_other_rows_and_the_cell_itself_are_untouched():
    cell, names = ungated_specs(SHIPPED, "primus")
    assert SHIPPED[METRIC].kind == "max" and cell[METRIC].kind == "info" and names == {METRIC}
    assert judged(SHIPPED, "primus", 0.97)["training.throughput_per_gpu"].status == "PASS"
    assert ungated_specs(None, "primus") == (None, set())


def test_every_shipped_threshold_file_says_so_and_ships_mem_usage_optional():
    files = sorted((REPO / "thresholds").glob("*_threshold.json"))
    assert files
    for path in files:
        comment = json.loads(path.read_text())["_comment"]
        assert "Primus: training.mem_usage is recorded but not gated" in comment, path.name
        cells, _, problems, _ = load_threshold_file(path)
        assert not problems and all(cell[METRIC].optional for cell in cells.values())
