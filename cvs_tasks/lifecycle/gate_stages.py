"""Stages that judge a combo from its training record alone (no cluster access): metric, loss curve."""

from __future__ import annotations

from cvs_tasks.judge.kinds import evaluate, unit_for
from cvs_tasks.judge.loss import convergence_row, curve_warmup_cutoff, fit_loss_curve, sample_curve
from cvs_tasks.judge.memory import explain, ungated_specs
from cvs_tasks.judge.reference import with_reference_rows
from cvs_tasks.lifecycle.health import FAILED_BY_HEALTH
from cvs_tasks.lifecycle.session import Session
from cvs_tasks.run import StageRecord
from cvs_tasks.run.records import step_rows
from cvs_tasks.run.stages import TRAINING


def _training(session: Session, combo: str) -> tuple[dict | None, StageRecord | None]:
    """The combo's training data, or the SKIPPED record explaining why there is none."""
    rec = session.run.read_record(TRAINING.id, combo)
    if rec is None or (rec.status == "SKIPPED" and not rec.data.get("blocked_by")):  # shown, never started
        return None, StageRecord.result("SKIPPED", "training has not run for this combo")
    judged = rec.status == "PASS" or rec.data.get("failed_by") == FAILED_BY_HEALTH  # results stand
    if not judged or not rec.data.get("completed"):
        # the row names the test to read (its own row and the report's callout hold the cause)
        blocker = rec.data.get("blocked_by") or rec.name
        outcome = {"FAIL": "failed", "ERROR": "errored"}.get(rec.status, "did not complete")
        reason = f"skipped: {rec.name} {outcome}" if blocker == rec.name else rec.reason
        skipped = StageRecord.result("SKIPPED", reason)
        skipped.data["blocked_by"] = blocker
        return None, skipped
    return rec.data, None


def actual_metrics(data: dict) -> dict[str, float | None]:
    actuals = dict(data.get("metrics", {}))
    actuals["training.scaling_efficiency_pct"] = data.get("scaling_efficiency_pct")
    actuals["training.tflops_recomputed"] = data.get("tflops_recomputed")
    if data.get("steps_to_target") is not None:
        actuals["training.steps_to_target"] = data.get("steps_to_target")
        actuals["training.time_to_target_seconds"] = data.get("time_to_target_seconds")
    return actuals


def metric(session: Session, combo_id: str | None) -> StageRecord:
    combo = session.plan.combo(combo_id)
    data, skipped = _training(session, combo.id)
    if skipped:
        return skipped
    cfg = session.config
    cell, recorded_only = ungated_specs(session.plan.suite.thresholds.get(combo.cell), session.plan.backend)
    rows = explain(judged_rows(session, combo.id, actual_metrics(data), cell), recorded_only)
    rows = with_reference_rows(rows, data.get("reference_metrics"), unit_for)
    converged = convergence_row(data.get("convergence"), cfg.enforce_thresholds)
    rows += [converged] if converged else []
    failed = [r for r in rows if r.status == "FAIL"]
    record = StageRecord.result("FAIL" if failed else "PASS", metrics=rows)
    if failed:
        record.reason = "; ".join(f"{r.name}: {r.reason}" for r in failed)
    elif not cfg.enforce_thresholds or not cell:
        why = "enforce_thresholds is false" if not cfg.enforce_thresholds else f"no threshold cell {combo.cell!r}"
        record.reason = f"record only ({why}): {len(rows)} metrics"
    else:
        passed = sum(r.status == "PASS" for r in rows)
        record.reason = f"{passed} gated metrics passed" + (
            f", {len(rows) - passed} recorded/skipped" if len(rows) > passed else ""
        )
    return record


def judged_rows(session: Session, combo: str, actuals: dict, cell) -> list:
    """Fixed thresholds by ``judge.kinds.evaluate``, ``baseline`` ones against the run history."""
    from cvs_tasks.history.baseline import baseline_rows, merge_rows, split_cell

    fixed, baseline = split_cell(cell)
    rows = evaluate(actuals, fixed, session.config.enforce_thresholds)
    if not baseline:
        return rows
    extra = baseline_rows(history_context(session), combo, actuals, baseline, session.config.enforce_thresholds,
                          lambda text: session.say(text, "warning"), unit_for)
    return merge_rows(rows, extra)


def history_context(session: Session):
    from cvs_tasks.history.baseline import GateContext
    from cvs_tasks.history.entry import cluster_key, config_hash

    manifest = session.run.manifest()
    return GateContext(session.history_path, config_hash(manifest.get("effective_config")),
                       cluster_key(manifest.get("hosts") or []), session.run.run_id,
                       float(manifest.get("created") or 0.0))


def loss_curve(session: Session, combo_id: str | None) -> StageRecord:
    combo = session.plan.combo(combo_id)
    data, skipped = _training(session, combo.id)
    if skipped:
        return skipped
    lc = session.config.loss_curve
    rows = step_rows(data)
    steps = [row for row in rows if row.loss is not None]
    cutoff = curve_warmup_cutoff((r.step for r in rows), data.get("planned"), data.get("last_step"))
    points = sample_curve(steps, lc.sample_every, lc.milestone_steps, cutoff)
    fit = fit_loss_curve(points, lc.max_slope)
    record = StageRecord.result("PASS", fit.detail)
    record.data = {
        "points": [[s, v] for s, v in fit.points],
        "slope": fit.slope,
        "max_slope": lc.max_slope,
        "n": fit.n,
        "decreasing": fit.decreasing,
        "enforced": lc.enforce,
    }
    if fit.slope is None:
        record.status = "SKIPPED"
    elif not fit.decreasing:
        record.status = "FAIL" if lc.enforce else "PASS"
        record.reason = ("training loss is not decreasing: " if lc.enforce
                         else "record only (loss_curve.enforce is false): ") + fit.detail
    return record
