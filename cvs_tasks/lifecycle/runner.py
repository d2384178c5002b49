"""Run one stage: skip what is done, skip after an early failure, time it, record it atomically.

The rules of docs/product.md#stages-and-their-order live here, once:
* a stage already recorded in this run is not redone (``--force`` redoes it);
* an early-stage failure (``blocks_later`` in ``run.stages``) skips everything after it;
* a stage body that raises a CvsError becomes an ERROR record naming the cause, never a traceback;
* an interrupted stage is recorded as interrupted, and a resumed run reruns it.
"""

from __future__ import annotations

import time
from typing import Callable

from cvs_tasks.errors import CvsError, InfraError
from cvs_tasks.lifecycle.session import Session
from cvs_tasks.run import StageRecord
from cvs_tasks.run.events import StageEvent
from cvs_tasks.run.stages import blocking_ids
from cvs_tasks.run.stages import stage as stage_row

StageBody = Callable[[Session, "str | None"], StageRecord]


class Interrupted(BaseException):
    """The user pressed Ctrl-C or the harness got SIGTERM.

    A BaseException (like KeyboardInterrupt): the transport's `except Exception` around a node
    command must not turn it into that node's error and let the run go on.
    """


def is_done(record: StageRecord | None) -> bool:
    """Recorded and final: an ERROR (infrastructure), an interrupted stage or one skipped because an
    earlier stage failed is redone by the next command; a FAIL stays until ``--force``."""
    return (
        record is not None
        and record.status != "ERROR"
        and not record.data.get("interrupted")
        and not record.data.get("blocked_by")
    )


def lifecycle_failed(session: Session, stage: str) -> StageRecord | None:
    """The early stage (``blocks_later`` in the stage table) whose failure blocks ``stage``, if any;
    the last stages (teardown) always run."""
    if stage_row(stage).last:
        return None
    for early in blocking_ids():
        if early == stage:
            return None
        rec = session.run.read_record(early)
        if rec is not None and rec.status in ("FAIL", "ERROR"):
            return rec
    return None


def execute(session: Session, stage: str, combo: str | None, body: StageBody, *,
            force: bool | None = None) -> StageRecord:
    force = session.force if force is None else force
    existing = session.run.read_record(stage, combo)
    if is_done(existing) and not force:
        session.say(f"{existing.name}: already {existing.status} in run {session.run.run_id} (--force reruns it)")
        return existing
    blocker = lifecycle_failed(session, stage)
    started = time.time()
    outer = session.listener
    with session.run.stage_log(stage, combo, outer) as stage_log:  # a link planted there is replaced first
        session.listener = stage_log
        log_rel = session.run.relative(session.run.stage_log_path(stage, combo))
        try:
            return _run_body(session, stage, combo, body, blocker, started, log_rel)
        finally:
            session.listener = outer


def _run_body(session: Session, stage: str, combo: str | None, body: StageBody, blocker, started: float,
              log_rel: str) -> StageRecord:
    session.listener(StageEvent(stage, combo))
    if blocker is not None:
        record = StageRecord(
            stage=stage,
            combo=combo,
            status="SKIPPED",
            reason=f"skipped: {blocker.name} {'failed' if blocker.status == 'FAIL' else 'errored'}",
        )
        record.data["blocked_by"] = blocker.name
    else:
        try:
            record = body(session, combo)
            record.stage, record.combo = stage, combo  # the body's result is this stage's record
        except Interrupted:
            record = StageRecord(stage=stage, combo=combo, status="ERROR", reason="interrupted by the user")
            record.data["interrupted"] = True
            _finish(session, record, started, log_rel)
            raise
        except CvsError as exc:
            record = StageRecord(stage=stage, combo=combo, status="ERROR", reason=session.redactor(str(exc)))
            if not isinstance(exc, InfraError):
                record.data["error_kind"] = type(exc).__name__
    _finish(session, record, started, log_rel)
    return record


def _finish(session: Session, record: StageRecord, started: float, log_rel: str) -> None:
    record.artifacts.setdefault("stage log", log_rel)
    record.started = record.started or started
    record.ended = time.time()
    record.reason = session.redactor(record.reason)
    session.run.write_record(record)
    session.listener(StageEvent(record.stage, record.combo, record.status, record.reason))


def exit_status(records: list[StageRecord]) -> int:
    """0 all gates passed, 1 a gate failed, 3 infrastructure failure (ERROR) — worst wins."""
    if any(r.status == "ERROR" for r in records):
        return 3
    if any(r.status == "FAIL" for r in records):
        return 1
    return 0
