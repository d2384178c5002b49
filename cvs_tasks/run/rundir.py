"""The run directory ``reports/<run-id>/``: the unit of state of every lifecycle command; which one a
command acts on; and the dry run's, which keeps what it would write in memory.

Layout (README.md#the-report): ``run.json`` manifest, ``stages/<stage>.json`` and
``stages/<stage>[<combo-dir>].json`` records, ``logs/`` pulled-back node logs and stage logs,
rendered ``report.html``, ``metrics.html``, ``junit.xml``, ``results.json``. Every JSON file is
written atomically (temp file + rename), the moment its stage ends.

``RunRequest`` (the run a command names) and ``DryRunDir`` (a run directory that records in memory
and writes nothing, for ``--dry-run``) are here, next to the run directory they pick and extend.
"""

from __future__ import annotations

import copy
import json
import os
import secrets
import tempfile
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from cvs_tasks.errors import BadInput, InfraError
from cvs_tasks.identifiers import control_characters, identifier_problem
from cvs_tasks.inputs import InputRefused, load_json
from cvs_tasks.run.events import StageLog
from cvs_tasks.run.records import StageRecord, check_manifest, combo_dir
from cvs_tasks.run.redact import Redactor
from cvs_tasks.run.sandbox import inside, make_dirs
from cvs_tasks.run.stages import stage_ids

MANIFEST = "run.json"
LATEST = "latest"
DEFAULT_REPORTS = "reports"


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON so a reader never sees a half-written file (temp file in the same dir + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=False, default=str)
            fh.write("\n")
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise InfraError(f"cannot write {path}: {exc.strerror or exc}") from None


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Temp file in the same directory, then rename over the target."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise InfraError(f"cannot write {path}: {exc.strerror or exc}") from None


def new_run_id(now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now or time.time()))
    return f"{stamp}-{secrets.token_hex(2)}"


def check_run_flag(run: str | None) -> None:
    """Refuse a ``--run`` whose run id (its last path part) could escape a folder or break a
    script (``..``, a newline, a slash-only path), or whose folders hold a control character (a
    newline in a parent would split every line that names the run directory), also where a symlink
    leads: BadInput (exit 2) before anything is written."""
    if run is None:
        return
    is_path = "/" in run or os.sep in run
    bad = control_characters(run) or (is_path and control_characters(_resolved(run)))
    if bad:
        raise BadInput(f"--run {run!r}: the path contains control character(s) {', '.join(bad)}; "
                       "use a folder whose name has none")
    name = Path(run).name if is_path else run
    problem = identifier_problem("run id", name)
    if problem:
        raise BadInput(f"--run {run!r}: {problem}")


def _resolved(path: str) -> str:
    """The absolute path symlinks lead to ('' when it cannot be resolved: a loop, an unreadable folder)."""
    try:
        return str(Path(path).expanduser().resolve())
    except (OSError, RuntimeError, ValueError):
        return ""


def load_record_file(path: Path, root: Path | None = None) -> StageRecord | None:
    """A stage record file, or None when it is missing, corrupt, tampered with or not a regular
    file (read through the bounded reader: a FIFO or a huge file is never read), or when it leads
    out of the run directory ``root`` (a symlink to a file elsewhere)."""
    try:
        if root is not None and inside(root, str(Path(path).relative_to(root))) is None:
            return None
        data, _ = load_json(path, "run record")
        return StageRecord.from_dict(data)
    except (InputRefused, ValueError, KeyError, TypeError, AttributeError):
        return None


class RunDir:
    """One run directory. Cheap to construct; reads files on demand.

    Every file it writes has each secret of ``redact`` masked (the session registers the run's
    secrets there) and lands in the run directory's own folders, never through a symlink."""

    durable = True  # what it writes stays; a dry run's ``DryRunDir`` keeps its records in memory only

    def __init__(self, path: Path, redact: Redactor | None = None) -> None:
        self.path = Path(path)
        self.redact = redact or Redactor()

    def child(self, path: Path) -> RunDir:
        """A run directory of its own inside this one (``invoke diagnose``'s one-node runs)."""
        run = type(self)(path, self.redact)
        run.stages_dir.mkdir(parents=True, exist_ok=True)
        return run

    # -- location -------------------------------------------------------------------------------
    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def stages_dir(self) -> Path:
        return self.path / "stages"

    @property
    def logs_dir(self) -> Path:
        return self.path / "logs"

    @classmethod
    def create(cls, reports_root: Path, run_id: str | None = None) -> RunDir:
        reports_root = Path(reports_root)
        check_run_flag(run_id)
        run = cls(reports_root / (run_id or new_run_id()))
        try:
            run.stages_dir.mkdir(parents=True, exist_ok=True)
            run.logs_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InfraError(f"cannot create run directory {run.path}: {exc.strerror or exc}") from None
        run._point_latest(reports_root)
        return run

    @classmethod
    def resolve(cls, reports_root: Path, run: str | None) -> RunDir:
        """A run id, a path, or None for ``reports/latest``; must exist."""
        reports_root = Path(reports_root)
        check_run_flag(run)
        if run:
            candidates = [Path(run), reports_root / run]
        else:
            candidates = [reports_root / LATEST]
        for cand in candidates:
            if (cand / MANIFEST).is_file():
                return cls(cand.resolve())
        tried = ", ".join(str(c) for c in candidates)
        hint = "pass --run <id> or start one with `invoke all`" if run is None else "check the run id"
        raise BadInput(f"no run directory found (tried {tried}); {hint}")

    def _point_latest(self, reports_root: Path) -> None:
        link = reports_root / LATEST
        tmp = reports_root / f".{LATEST}.{os.getpid()}"
        try:
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(self.path.name)
            os.replace(tmp, link)
        except OSError:
            tmp.unlink(missing_ok=True)  # a filesystem without symlinks: latest is a convenience

    # -- manifest -------------------------------------------------------------------------------
    def write_manifest(self, manifest: dict[str, Any]) -> None:
        self.write_json(self.path / MANIFEST, manifest)

    def write_json(self, path: Path, data: Any) -> None:
        """A JSON file of this run, secrets masked, written atomically inside the run directory."""
        self._folder(path)
        write_json_atomic(path, self.redact.data(data))

    def write_text(self, path: Path, text: str) -> None:
        """A text file of this run (a rendered page), secrets masked, written atomically inside it."""
        self._folder(path)
        write_bytes_atomic(path, self.redact(text).encode("utf-8"))

    def _folder(self, path: Path) -> None:
        make_dirs(self.path, Path(path).parent)  # BadInput names the part that leads elsewhere

    def manifest(self) -> dict[str, Any]:
        path = self.path / MANIFEST
        if not os.path.lexists(path):
            return {}
        if inside(self.path, MANIFEST) is None:
            raise BadInput(f"unreadable manifest {path}: a symlink leading outside the run directory {self.path}; "
                           "a run directory is read only from its own files")
        try:
            data, _ = load_json(path, "run record")
        except InputRefused as exc:
            raise BadInput(f"unreadable manifest {exc}") from None
        return check_manifest(data, path)

    # -- stage records --------------------------------------------------------------------------
    def record_path(self, stage: str, combo: str | None = None) -> Path:
        name = f"{stage}[{combo_dir(combo)}].json" if combo else f"{stage}.json"
        return self.stages_dir / name

    def write_record(self, record: StageRecord) -> Path:
        path = self.record_path(record.stage, record.combo)
        self.write_json(path, record.to_dict())
        return path

    def read_record(self, stage: str, combo: str | None = None) -> StageRecord | None:
        return load_record_file(self.record_path(stage, combo), self.path)  # a corrupt record counts as not done

    def records(self) -> list[StageRecord]:
        """Every readable record, in lifecycle order, then combo order of the manifest."""
        out: list[StageRecord] = []
        if not self.stages_dir.is_dir():
            return out
        for path in self.stages_dir.glob("*.json"):
            record = load_record_file(path, self.path)
            if record is not None:
                out.append(record)
        return self._ordered(out)

    def _ordered(self, out: list[StageRecord]) -> list[StageRecord]:
        combos = self.manifest().get("combos")
        combos = [c for c in combos if isinstance(c, str)] if isinstance(combos, list) else []
        stage_rank = {s: i for i, s in enumerate(stage_ids())}

        def key(r: StageRecord) -> tuple[int, int, str]:
            c = combos.index(r.combo) if r.combo in combos else len(combos)
            return (stage_rank.get(r.stage, 99), c, r.combo or "")

        return sorted(out, key=key)

    def remove_record(self, stage: str, combo: str | None = None) -> None:
        self.record_path(stage, combo).unlink(missing_ok=True)

    # -- logs -----------------------------------------------------------------------------------
    def node_log_path(self, stage: str, combo: str | None, rank: int) -> Path:
        """Where a node's pulled-back training log lives: logs/<stage>/<combo-dir>/out-node<N>/training.log."""
        label = combo_dir(combo) if combo else stage
        return self.logs_dir / stage / label / f"out-node{rank}" / "training.log"

    def prepare_file(self, path: Path) -> Path:
        """``path`` with its folders made inside the run directory (none of them a symlink), and
        a symlink planted at ``path`` itself removed (the link, not what it points to)."""
        self._folder(path)
        if os.path.islink(path):
            Path(path).unlink()
        return path

    def stage_log_path(self, stage: str, combo: str | None = None) -> Path:
        name = f"{stage}[{combo_dir(combo)}].log" if combo else f"{stage}.log"
        return self.logs_dir / name

    def stage_log(self, stage: str, combo: str | None, forward: Callable[[object], None]) -> StageLog:
        """The stage's own log: a listener that writes each event to ``stage_log_path`` and passes it on
        (a context manager: the file is open while the stage runs)."""
        return StageLog(self.stage_log_path(stage, combo), forward, root=self.path, redact=self.redact)

    def relative(self, path: Path) -> str:
        return str(Path(path).resolve().relative_to(self.path.resolve()))


# -- which run a command acts on -------------------------------------------------------------------
@dataclass
class RunRequest:
    """What the user asked for on the command line: the run a lifecycle command acts on.

    It lives in the run layer, below the lifecycle, so a task can build one (and have ``--run``
    refused) without importing the lifecycle code. All optional; a hostile ``run`` is refused here,
    at construction (BadInput, exit 2)."""

    config: str | None = None
    cluster: str | None = None
    run: str | None = None
    suite: str | None = None
    reports_dir: str | None = None
    new: bool = False  # `invoke all` without --run starts a new run
    check_config: bool = True  # teardown skips it: releasing nodes must work after an edit
    dry_run: bool = False
    force: bool = False
    # the command line may launch containers or train (README, "Chaining rules"): it joins a run that
    # is over only when --run names it; one that does not (judging, teardown) joins any
    launches: bool = True
    judges: bool = False  # the command only judges records (metric, loss): it never starts a run

    def __post_init__(self) -> None:
        check_run_flag(self.run)

    @property
    def reports_root(self) -> Path:
        if self.run and os.sep in self.run:
            return Path(self.run).expanduser().resolve().parent
        return Path(self.reports_dir or os.environ.get("CVS_REPORTS_DIR") or DEFAULT_REPORTS)


# -- a dry run's run directory ---------------------------------------------------------------------
class DryRunDir(RunDir):
    """The run directory of a dry run: it records what a run would write, in memory, and writes nothing.

    Together with ``remote.dryrun.DryRunHosts`` (a transport that prints each command instead of
    running it) this is the whole of ``--dry-run``: the stages run the same code as in a run, against
    a transport and a run directory that record instead of act.

    Reads see what this dry run recorded first, then the disk: stages chain, judge and skip as in a
    run (a smoke that would fail skips the training after it; a job gets the HF token file the launch
    would place), and a dry run pointed at a real run (``--run``) sees that run's records without
    touching them. ``records()`` is the run as it would stand afterwards, so the dry run exits with
    the status the stages would have."""

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
