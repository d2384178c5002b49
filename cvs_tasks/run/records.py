"""The records a run directory holds: one StageRecord per stage (and per combo), as plain data.

Reports read only these; nothing downstream re-parses a console. Every record round-trips through
JSON with ``to_dict``/``from_dict``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

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
