"""Loss-curve slope, scaling efficiency and checkpoint continuity judgements."""

import math
from pathlib import Path

import pytest

from cvs_tasks.jobs.checkpoint import last_checkpoint_step
from cvs_tasks.judge.loss import checkpoint_continuity, fit_loss_curve, sample_curve
from cvs_tasks.judge.scaling import scaling_efficiency
from cvs_tasks.metrics import Iteration, parse_file, warmup_cutoff

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


def it(step, loss=None, ms=1000.0):
    return Iteration(step, 20, ms, None, None, None, None, None, loss, None, 0, 0, None, None)


def test_sampling_reference_example():
    rows = [it(s, 12 - 0.3 * s) for s in range(1, 21)]
    assert [s for s, _ in sample_curve(rows, 10, [], warmup_cutoff(20, 20))] == [3, 10, 20]
    assert [s for s, _ in sample_curve(rows, 0, [5, 7], 2)] == list(range(3, 21))
    assert [s for s, _ in sample_curve(rows, 100, [5, 7], 2)] == [3, 5, 7, 20]
    assert sample_curve([it(s) for s in range(1, 5)], 1, [], 2) == []


def test_fit_slope_and_gate():
    points = [(s, 10 - 0.5 * s) for s in (3, 10, 20)]
    result = fit_loss_curve(points, 0.0)
    assert result.slope == pytest.approx(-0.5) and result.decreasing and result.n == 3
    assert not fit_loss_curve([(1, 1.0), (2, 2.0)], 0.0).decreasing
    assert fit_loss_curve(points, -0.6).decreasing is False


@pytest.mark.parametrize("points", [[], [(5, 1.0)], [(5, 1.0), (5, 2.0)]])
def test_not_enough_points(points):
    result = fit_loss_curve(points, 0.0)
    assert result.slope is None and result.decreasing is None
    assert "not enough points" in result.detail


def test_scaling_efficiency_uses_tokens():
    assert scaling_efficiency(850.0, 2, 8, 6800.0, 1) == pytest.approx(100.0)
    assert scaling_efficiency(400.0, 2, 8, 6800.0, 1) == pytest.approx(6400 / 13600 * 100)
    for bad in [(None, 2, 8, 1.0, 1), (1.0, 2, 8, 0.0, 1), (1.0, 2, 8, 1.0, 0), (math.nan, 2, 8, 1.0, 1)]:
        assert scaling_efficiency(*bad) is None


def test_checkpoint_continuity_reference_example():
    ok = checkpoint_continuity({20: 6.10}, {21: 6.35, 22: 6.3}, 20, 0.05)
    assert ok.ok and ok.tolerance == pytest.approx(0.305) and ok.increase == pytest.approx(0.25)
    assert not checkpoint_continuity({20: 6.10}, {21: 6.50}, 20, 0.05).ok
    assert checkpoint_continuity({20: 6.10}, {21: 5.0}, 20, 0.0).ok  # a decrease is fine
    wrong_start = checkpoint_continuity({20: 6.1}, {1: 10.0, 2: 9.0}, 20, 0.05)
    assert not wrong_start.ok and "expected 21" in wrong_start.reason
    assert "no iteration lines" in checkpoint_continuity({20: 6.1}, {}, 20, 0.05).reason
    assert "no loss" in checkpoint_continuity({19: 6.1}, {21: 6.0}, 20, 0.05).reason


def test_checkpoint_logs_end_to_end():
    save = parse_file(LOGS / "ckpt_save_primus.log")
    resume = parse_file(LOGS / "ckpt_resume_primus.log")
    losses = [{s: it.loss for s, it in p.iterations.items()} for p in (save, resume)]  # as the stage reads them
    result = checkpoint_continuity(*losses, last_checkpoint_step(21, 10), 0.05)
    assert result.ok and result.first_resumed_step == 21
    assert result.increase == pytest.approx(0.1)


def test_a_resumed_curve_warms_up_from_its_own_first_step():
    from cvs_tasks.judge.loss import curve_warmup_cutoff

    # fresh: 20 planned from step 1 -> the first 2 steps are warm-up
    assert curve_warmup_cutoff(range(1, 21), 20, 20) == 2
    # resumed at 14001 of 15550: 10 % of the 1550 steps it runs, counted from 14001
    assert curve_warmup_cutoff(range(14001, 15551), 15550, 15550) == 14155
    # no rows: counted from step 1, from the last step seen when nothing was planned
    assert curve_warmup_cutoff([], None, 30) == 3
