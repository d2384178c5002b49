"""Where parsed iterations live: one typed array per field, not one object per line.

A 1 GB iteration-only log has ~2.7 million lines; an object per line would cost more memory than
the text. Rows are appended column-wise in bulk (C loops) and turned into ``Iteration`` objects
only when someone reads them (``IterationMap``, ``IterationBatch``). Duplicated steps (Primus
forwards the last rank's line to rank 0) replace the earlier row: the last one wins.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterator, Mapping, Sequence
from itertools import compress, islice
from operator import lt, not_
from typing import Callable

from cvs_tasks.metrics.iteration import COLUMNS, NAN, Iteration

_NCOL = len(COLUMNS)


class IterationStore:
    """Column arrays (float64, NaN = missing; steps int64) kept sorted by step."""

    def __init__(self) -> None:
        self.steps = array("q")
        self.cols: list[array] = [array("d") for _ in range(_NCOL)]  # col 0 unused (steps)
        self._index: dict[int, int] | None = None  # step -> row, built only when steps repeat

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def last_step(self) -> int | None:
        return self.steps[-1] if self.steps else None

    def extend_columns(self, steps: list[int], columns: list[array]) -> bool:
        """Append a batch in bulk; False (nothing stored) unless it continues the sorted order."""
        if not steps:
            return True
        if self.steps and steps[0] <= self.steps[-1]:
            return False
        if not all(map(lt, steps, islice(steps, 1, None))):
            return False
        self.steps.extend(steps)
        for i in range(1, _NCOL):
            self.cols[i].extend(columns[i])
        if self._index is not None:
            base = len(self.steps) - len(steps)
            self._index.update(zip(steps, range(base, base + len(steps))))
        return True

    def put_row(self, row: tuple) -> int:
        """Store one row (replacing a row with the same step); returns its position."""
        step = row[0]
        if not self.steps or step > self.steps[-1]:
            self.steps.append(step)
            for i in range(1, _NCOL):
                self.cols[i].append(row[i])
            if self._index is not None:
                self._index[step] = len(self.steps) - 1
            return len(self.steps) - 1
        if self._index is None:
            self._index = {s: i for i, s in enumerate(self.steps)}
        pos = self._index.get(step)
        if pos is None:  # an earlier step arriving late: insert in order, rebuild the index
            pos = bisect.bisect_left(self.steps, step)
            self.steps.insert(pos, step)
            for i in range(1, _NCOL):
                self.cols[i].insert(pos, row[i])
            self._index = {s: i for i, s in enumerate(self.steps)}
            return pos
        for i in range(1, _NCOL):
            self.cols[i][pos] = row[i]
        return pos

    def split_off(self, keep: list[bool]) -> tuple[array, list]:
        """Keep the rows where ``keep`` is True; return the others as (steps, columns), step order."""
        drop = list(map(not_, keep))
        gone = array("q", compress(self.steps, drop))
        gone_cols: list = [None] + [array("d", compress(col, drop)) for col in self.cols[1:]]
        self.steps = array("q", compress(self.steps, keep))
        self.cols = [self.cols[0]] + [array("d", compress(col, keep)) for col in self.cols[1:]]
        if self._index is not None:
            self._index = {s: i for i, s in enumerate(self.steps)}
        return gone, gone_cols

    def row(self, pos: int) -> tuple:
        return (self.steps[pos],) + tuple(self.cols[i][pos] for i in range(1, _NCOL))

    def position(self, step: int) -> int | None:
        pos = bisect.bisect_left(self.steps, step)
        return pos if pos < len(self.steps) and self.steps[pos] == step else None

    def first_after(self, cutoff: int) -> int:
        """Position of the first row with step > cutoff."""
        return bisect.bisect_right(self.steps, cutoff)

    def column(self, name: str, start: int = 0) -> array:
        return self.cols[COLUMNS.index(name)][start:]


Materialize = Callable[[tuple], Iteration]


class IterationMap(Mapping[int, Iteration]):
    """step -> Iteration, read from the store on access (sorted by step)."""

    def __init__(self, store: IterationStore, make: Materialize) -> None:
        self._store, self._make = store, make

    def __getitem__(self, step: int) -> Iteration:
        pos = self._store.position(step) if isinstance(step, int) else None
        if pos is None:
            raise KeyError(step)
        return self._make(self._store.row(pos))

    def __iter__(self) -> Iterator[int]:
        return iter(list(self._store.steps))

    def __len__(self) -> int:
        return len(self._store)

    def values_list(self) -> list[Iteration]:
        return [self._make(self._store.row(i)) for i in range(len(self._store))]


class IterationBatch(Sequence[Iteration]):
    """The iterations one ``feed`` produced, in log order; built into objects only when read.

    A row the retention rule did not keep (now or after a later feed) is re-read from the text it
    came from (``lookup``), which the batch holds on to only as long as the caller holds it.
    """

    def __init__(self, store: IterationStore, make: Materialize, steps: list[int],
                 lookup: Callable[[int], tuple | None] | None = None) -> None:
        self._store, self._make, self._steps, self._lookup = store, make, steps, lookup

    def __len__(self) -> int:
        return len(self._steps)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._steps)))]
        step = self._steps[index]
        pos = self._store.position(step)
        if pos is not None:
            return self._make(self._store.row(pos))
        row = self._lookup(step) if self._lookup is not None else None
        if row is None:
            raise LookupError(f"iteration {step} is no longer held (retention) and its text is gone")
        return self._make(row)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"IterationBatch({len(self)} iterations)"


def nan_column(n: int) -> array:
    return array("d", [NAN]) * n
