"""The per-step rows of a training record: one typed row, stored as a compact list."""

from __future__ import annotations

from cvs_tasks.run.records import StepRow, step_rows


def test_a_row_round_trips_through_its_stored_list():
    row = StepRow(12, 2950.5, 401.2, 6650.0, 7.31)
    assert StepRow.from_list(row.to_list()) == row
    assert StepRow.from_list([3, None, None, None, None]) == StepRow(3, None, None, None, None)


def test_malformed_stored_rows_are_skipped_not_misread():
    data = {"steps": [[1, 10.0, 2.0, 3.0, 4.0], [2, 10.0, 2.0, 3.0], ["3", 1, 2, 3, 4], [4.0, 1, 2, 3, 4],
                      "junk", [5, "x", True, 3.0, 9.5], [True, 1, 2, 3, 4]]}
    rows = step_rows(data)
    assert [r.step for r in rows] == [1, 5]
    assert rows[1] == StepRow(5, None, None, 3.0, 9.5)  # non-numbers (and bools) read as unknown
    assert step_rows({}) == [] and step_rows({"steps": "no"}) == [] and step_rows(None) == []
