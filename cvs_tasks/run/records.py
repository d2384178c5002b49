"""What a run directory's files hold, as plain data: one StageRecord per stage (and per combo), and
the manifest (``run.json``), each checked as it is read back.

Reports read only these; nothing downstream re-parses a console. Every record round-trips through
JSON with ``to_dict``/``from_dict``.

The manifest is read by every later command of a run, by ``invoke report`` and by the history;
a hand-edited or tampered one must fail as one line naming the file and the field (exit 2), never
as a traceback deep in a reader. Each known field is declared once (``FIELDS``) with its kind; a
field that is absent or null reads as "not recorded"; unknown fields are kept and not read.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

from cvs_tasks.errors import BadInput

Status = Literal["PASS", "FAIL", "ERROR", "SKIPPED"]
MetricStatus = Literal["PASS", "FAIL", "RECORD", "SKIPPED"]


def _expect(ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(f"not a valid {what}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def test_name(stage: str, combo: str | None = None) -> str:
    """``test_training[MBS=4,GBS=128,PRECISION=FP8]`` style name of a stage row."""
    return f"test_{stage}[{combo}]" if combo else f"test_{stage}"


_DIR_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def combo_dir(combo: str) -> str:
    """On-disk name of a combo: ``=`` and ``,`` (and anything not ASCII-safe) become ``_``; never
    ``.`` or ``..``. Names are validated at load (`identifiers`), this is the last line of defence."""
    name = "".join(ch if ch in _DIR_SAFE else "_" for ch in combo)
    return name if name.strip(".") else name.replace(".", "_") or "_"


@dataclass(frozen=True)
class StepRow:
    """One training step of a combo's per-step curve (the ``steps`` of a training record).

    Stored as a compact list ``[step, elapsed_ms, tflops, tokens_per_gpu, loss]`` (a record may
    hold 20 000 of them); written and read only through ``to_list`` / ``from_list``."""

    step: int
    elapsed_ms: float | None
    tflops: float | None
    tokens_per_gpu: float | None
    loss: float | None

    def to_list(self) -> list:
        return [self.step, self.elapsed_ms, self.tflops, self.tokens_per_gpu, self.loss]

    @classmethod
    def from_list(cls, row: Any) -> StepRow | None:
        """The row, or None when it is not a well-formed stored step (a hand-edited record)."""
        if not isinstance(row, (list, tuple)) or len(row) != 5 or type(row[0]) is not int:
            return None
        values = [v if _is_number(v) else None for v in row[1:]]
        return cls(row[0], *values)


def step_rows(data: dict[str, Any]) -> list[StepRow]:
    """The well-formed per-step rows of a training record's data (others are skipped)."""
    rows = data.get("steps") if isinstance(data, dict) else None
    parsed = (StepRow.from_list(r) for r in rows) if isinstance(rows, list) else ()
    return [r for r in parsed if r is not None]


@dataclass
class MetricRow:
    """One gated (or recorded) metric of one combo."""

    name: str  # e.g. "training.throughput_per_gpu"
    value: float | None
    unit: str  # e.g. "TFLOP/s/GPU", "ms"
    expected: str  # human form of the spec, e.g. ">= 100", "<= 500 ms", "-" when none
    status: MetricStatus
    reason: str = ""

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MetricRow:
        row = cls(**{k: d.get(k) for k in ("name", "value", "unit", "expected", "status", "reason")})
        _expect(isinstance(row.name, str) and isinstance(row.status, str)
                and (row.value is None or _is_number(row.value)), "metric row")
        return row


@dataclass
class NodeOutcome:
    """How one node fared in a stage."""

    host: str
    rank: int
    status: Status
    reason: str = ""
    last_step: int | None = None
    planned: int | None = None
    log: str | None = None  # path of the pulled-back node log, relative to the run directory

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NodeOutcome:
        node = cls(**{k: d.get(k) for k in cls.__dataclass_fields__})
        _expect(isinstance(node.host, str) and type(node.rank) is int and isinstance(node.status, str), "node outcome")
        return node


@dataclass
class StageRecord:
    """The result of one stage run (one combo for per-combo stages)."""

    stage: str
    status: Status
    combo: str | None = None
    reason: str = ""
    started: float = 0.0  # unix seconds
    ended: float = 0.0
    metrics: list[MetricRow] = field(default_factory=list)
    nodes: list[NodeOutcome] = field(default_factory=list)
    artifacts: dict[str, str] = field(default_factory=dict)  # label -> path relative to run dir
    data: dict[str, Any] = field(default_factory=dict)  # stage-specific numbers (see lifecycle)
    attempts: list[dict[str, Any]] = field(default_factory=list)  # retried infrastructure steps

    @classmethod
    def result(cls, status: Status, reason: str = "", **fields: Any) -> StageRecord:
        """What a stage body returns: the runner (``lifecycle.runner.execute``) stamps its stage
        and combo, so a body never writes its own id."""
        return cls(stage="", status=status, reason=reason, **fields)

    @property
    def name(self) -> str:
        return test_name(self.stage, self.combo)

    @property
    def duration(self) -> float:
        return max(0.0, self.ended - self.started)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["name"] = self.name
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StageRecord:
        """The record, or ValueError/TypeError for a file that is not one (tampered, truncated)."""
        _expect(isinstance(d, dict) and isinstance(d.get("stage"), str) and isinstance(d.get("status"), str)
                and isinstance(d.get("combo"), (str, type(None))) and isinstance(d.get("reason", ""), str)
                and all(isinstance(d.get(k, []), list) for k in ("metrics", "nodes", "attempts"))
                and all(isinstance(d.get(k, {}), dict) for k in ("artifacts", "data")), "stage record")
        return cls(
            stage=d["stage"],
            status=d["status"],
            combo=d.get("combo"),
            reason=d.get("reason", ""),
            started=float(d.get("started", 0.0)),
            ended=float(d.get("ended", 0.0)),
            metrics=[MetricRow.from_dict(m) for m in d.get("metrics", [])],
            nodes=[NodeOutcome.from_dict(n) for n in d.get("nodes", [])],
            artifacts=dict(d.get("artifacts", {})),
            data=dict(d.get("data", {})),
            attempts=list(d.get("attempts", [])),
        )


# -- the manifest ----------------------------------------------------------------------------------
MAX_TEXT = 4096  # a path, an image name, a host (a manifest field)
MAX_ITEMS = 100_000  # hosts, combos, warnings
MAX_TIME = 1e11  # unix seconds (year 5138)


def _text(value: Any) -> str | None:
    if not isinstance(value, str):
        return "a string"
    return f"at most {MAX_TEXT} characters" if len(value) > MAX_TEXT else None


def _texts(value: Any) -> str | None:
    if not isinstance(value, list) or len(value) > MAX_ITEMS:
        return f"a list of at most {MAX_ITEMS} strings"
    bad = next((i for i, item in enumerate(value) if _text(item)), None)
    return None if bad is None else f"a list of strings of at most {MAX_TEXT} characters (item {bad} is not)"


def _time(value: Any) -> str | None:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return None if number and math.isfinite(value) and 0 <= value < MAX_TIME else "a time in unix seconds"


def _count(value: Any) -> str | None:
    return None if type(value) is int and 0 <= value < 2**31 else "a whole number"


def _flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else "true or false"


def _object(value: Any) -> str | None:
    return None if isinstance(value, dict) else "a JSON object"


FIELDS: dict[str, Callable[[Any], str | None]] = {
    "run_id": _text, "tool_version": _text, "created": _time, "finished": _time, "interrupted": _flag,
    "config_file": _text, "cluster_file": _text, "threshold_file": _text, "files_hash": _text,
    "suite_flag": _text, "warnings": _texts, "suite": _text, "backend": _text, "image": _text,
    "image_digest": _text, "runtime": _text, "gpu_name": _text, "gpus_per_node": _count, "hosts": _texts,
    "model_name": _text, "enforce_thresholds": _flag, "combos": _texts, "effective_config": _object,
    "scope": _text, "slurm": _object,
}


def manifest_problems(data: Any) -> list[str]:
    """``field: should be ...`` for every known field of the wrong kind ([] when it reads well)."""
    if not isinstance(data, dict):
        return ["the top level is not a JSON object"]
    problems = []
    for name, check in FIELDS.items():
        value = data.get(name)
        why = check(value) if value is not None else None
        if why:
            problems.append(f"{name}: should be {why}, not {_shown(value)}")
    return problems


def check_manifest(data: Any, path: Path) -> dict[str, Any]:
    """``data`` when every known field reads well; else BadInput naming the file and each field."""
    problems = manifest_problems(data)
    if problems:
        raise BadInput(f"unreadable manifest {path}: " + "; ".join(problems[:5])
                       + " (a hand-edited run.json? restore it, or start a new run)")
    return data


def _shown(value: Any) -> str:
    kind = type(value).__name__
    if isinstance(value, (str, list, dict)):
        return f"a {kind} of {len(value)} {'characters' if isinstance(value, str) else 'items'}"
    text = repr(value)
    return f"{kind} {text[:40]}{'...' if len(text) > 40 else ''}"
