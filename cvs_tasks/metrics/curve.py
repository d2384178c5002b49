"""The per-step curve kept for reports and the watcher: every step of a realistic run, thinned
evenly past ``MAX_ROWS`` so a log of any length stays bounded (run metrics never depend on it;
``runstats`` keeps them exact).

Thinning doubles a stride and keeps the steps that are multiples of it plus the latest step, so
a log of any length keeps between ``MAX_ROWS / 2`` and ``MAX_ROWS`` rows spread over the run
(plus the latest row, whatever its step).
Rows are tuples in ``iteration.COLUMNS`` order and become ``Iteration`` objects when read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Callable

from cvs_tasks.metrics.iteration import Iteration

MAX_ROWS = 20_000
Make = Callable[[tuple], Iteration]


class Curve:
    """step -> row, thinned by a doubling stride; a repeated step keeps its last line."""

    def __init__(self) -> None:
        self.rows: dict[int, tuple] = {}
        self.stride = 1
        self.latest: tuple | None = None  # the last row read, kept or not
        self._sorted: list[int] | None = None

    def add(self, row: tuple) -> None:
        self.latest = row
        self._sorted = None
        if row[0] % self.stride:
            return
        self.rows[row[0]] = row
        if len(self.rows) > MAX_ROWS:
            self.stride *= 2
            self.rows = {s: r for s, r in self.rows.items() if s % self.stride == 0}

    def get(self, step: int) -> tuple | None:
        row = self.rows.get(step)
        if row is None and self.latest is not None and self.latest[0] == step:
            return self.latest
        return row

    def sorted_steps(self) -> list[int]:
        if self._sorted is None:
            steps = set(self.rows)
            if self.latest is not None:
                steps.add(self.latest[0])
            self._sorted = sorted(steps)
        return self._sorted


class IterationMap(Mapping[int, Iteration]):
    """step -> Iteration over the kept curve, sorted by step."""

    def __init__(self, curve: Curve, make: Make) -> None:
        self._curve, self._make = curve, make

    def __getitem__(self, step: int) -> Iteration:
        row = self._curve.get(step) if isinstance(step, int) else None
        if row is None:
            raise KeyError(step)
        return self._make(row)

    def __iter__(self) -> Iterator[int]:
        return iter(list(self._curve.sorted_steps()))

    def __len__(self) -> int:
        return len(self._curve.sorted_steps())


class Batch(Sequence[Iteration]):
    """The iterations one ``feed`` read, in log order; each built only when read."""

    def __init__(self, rows: list[tuple], make: Make) -> None:
        self._rows, self._make = rows, make

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self._make(row) for row in self._rows[index]]
        return self._make(self._rows[index])
