"""The run directory of a dry run: it records what a run would write, in memory, and writes nothing.

Together with ``remote.dryrun.DryRunHosts`` (a transport that prints each command instead of
running it) this is the whole of ``--dry-run``: the stages run the same code as in a run, against
a transport and a run directory that record instead of act.

Reads see what this dry run recorded first, then the disk: stages chain, judge and skip as in a
run (a smoke that would fail skips the training after it; a job gets the HF token file the launch
would place), and a dry run pointed at a real run (``--run``) sees that run's records without
touching them. ``records()`` is the run as it would stand afterwards, so the dry run exits with the
status the stages would have.
"""

from __future__ import annotations

import copy
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable

from cvs_tasks.run.records import StageRecord
from cvs_tasks.run.redact import Redactor
from cvs_tasks.run.rundir import RunDir


class DryRunDir(RunDir):
    durable = False

    def __init__(self, path: Path, redact: Redactor | None = None) -> None:
        super().__init__(path, redact)
        self.recorded: dict[tuple[str, str | None], StageRecord] = {}
        self._manifest: dict[str, Any] | None = None

    def child(self, path: Path) -> DryRunDir:
        return DryRunDir(path, self.redact)

    # -- kept in memory -------------------------------------------------------------------------
    def write_manifest(self, manifest: dict[str, Any]) -> None:
        self._manifest = copy.deepcopy(manifest)

    def manifest(self) -> dict[str, Any]:
        return copy.deepcopy(self._manifest) if self._manifest is not None else super().manifest()

    def write_record(self, record: StageRecord) -> Path:
        self.recorded[(record.stage, record.combo)] = copy.deepcopy(record)
        return self.record_path(record.stage, record.combo)

    def read_record(self, stage: str, combo: str | None = None) -> StageRecord | None:
        kept = self.recorded.get((stage, combo))
        return copy.deepcopy(kept) if kept is not None else super().read_record(stage, combo)

    def records(self) -> list[StageRecord]:
        merged = {(r.stage, r.combo): r for r in super().records()}
        merged.update((key, copy.deepcopy(r)) for key, r in self.recorded.items())
        return self._ordered(list(merged.values()))

    def remove_record(self, stage: str, combo: str | None = None) -> None:
        self.recorded.pop((stage, combo), None)

    # -- nothing on disk ------------------------------------------------------------------------
    def write_json(self, path: Path, data: Any) -> None:
        """Nothing is written (rendered pages and JSON files are a run's, not a dry run's)."""

    def write_text(self, path: Path, text: str) -> None:
        """Nothing is written."""

    def prepare_file(self, path: Path) -> Path:
        """The path a run would write (no folder is made)."""
        return path

    def stage_log(self, stage: str, combo: str | None, forward: Callable[[object], None]):
        """No log file: the events go on to the console as they are."""
        return nullcontext(forward)
