"""Convergence as docs/product.md#convergence describes it: the final loss against the target."""

from __future__ import annotations

import pytest

from cvs_tasks.judge.loss import convergence_row, judge_convergence, seconds_until
from cvs_tasks.metrics import LogParser

# docs/reference_suite.md#convergence: losses 12.2, 11.9, ... at -0.3 per step, step 1 takes 9 s, the rest 0.5 s
REFERENCE = [(1, 9000.0, 12.2)] + [(s, 500.0, 12.2 - 0.3 * (s - 1)) for s in range(2, 21)]
# docs/log_formats.md#validation-lines: Megatron's periodic and end-of-training evaluation lines
EVAL_LOG = """\
 validation loss at iteration 1000 | lm loss value: 2.913344E+00 | lm loss PPL: 1.841722E+01 |
 validation loss at iteration 5000 on validation set | lm loss value: 2.587101E+00 | lm loss PPL: 1.329049E+01 |
 validation loss at iteration 5000 on test set | lm loss value: 2.999999E+00 | lm loss PPL: 2.008551E+01 |
"""


def test_the_document_example_reaches_the_target_and_the_final_loss_passes():
    result = judge_convergence(REFERENCE, {}, "auto", 7.0)
    assert result.metric == "train_loss" and result.final_step == 20
    assert result.final_value == pytest.approx(12.2 - 0.3 * 19) and result.reached
    assert result.steps_to_target == 19
    assert result.time_to_target_seconds == pytest.approx(9.0 + 18 * 0.5)
    row = convergence_row(result.to_dict(), enforce=True)
    assert (row.name, row.status, row.expected) == ("training.final_loss", "PASS", "<= 7")
    assert "reached at step 19 after 18.0 s" in row.reason


@pytest.mark.parametrize("target", [0, 0.0, -1.0, None])
def test_a_target_of_zero_or_less_turns_the_check_off(target):
    assert judge_convergence(REFERENCE, {}, "auto", target) is None
    assert convergence_row(None, enforce=True) is None


def test_the_final_loss_is_judged_not_the_first_step_that_reached_the_target():
    steps = [(1, 1000.0, 8.0), (2, 1000.0, 6.5), (3, 1000.0, 7.4)]  # dips below 7.0, ends above it
    result = judge_convergence(steps, {}, "train_loss", 7.0)
    assert result.steps_to_target == 2 and result.time_to_target_seconds == pytest.approx(2.0)
    assert result.final_value == 7.4 and not result.reached
    row = convergence_row(result.to_dict(), enforce=True)
    assert row.status == "FAIL" and "final training loss 7.4 at step 3 is above the target 7" in row.reason
    assert convergence_row(result.to_dict(), enforce=False).status == "RECORD"


def test_a_target_never_reached_fails_and_records_no_steps_to_target():
    result = judge_convergence(REFERENCE, {}, "train_loss", 1.0)
    assert result.steps_to_target is None and result.time_to_target_seconds is None
    row = convergence_row(result.to_dict(), enforce=True)
    assert row.status == "FAIL" and "never reached" in row.reason


def test_auto_uses_the_eval_loss_when_the_run_evaluated():
    parser = LogParser()
    parser.feed(EVAL_LOG)
    evals = parser.facts.eval_losses
    assert evals == {1000: pytest.approx(2.913344), 5000: pytest.approx(2.587101)}  # the test-set line is not eval
    steps = [(s, 1000.0, 3.5 - s / 10000) for s in range(1, 5001, 100)] + [(5000, 1000.0, 3.0)]
    result = judge_convergence(steps, evals, "auto", 2.6)
    assert result.metric == "eval_loss" and result.final_step == 5000 and result.reached
    assert result.steps_to_target == 5000 and result.time_to_target_seconds > 0
    train = judge_convergence(steps, evals, "train_loss", 2.6)
    assert train.metric == "train_loss" and not train.reached


def test_eval_loss_asked_for_but_never_logged_says_what_to_do():
    result = judge_convergence(REFERENCE, {}, "eval_loss", 7.0)
    assert result.metric == "eval_loss" and result.final_value is None
    row = convergence_row(result.to_dict(), enforce=True)
    assert row.status == "FAIL" and "--eval-iters" in row.reason and "train_loss" in row.reason
    assert convergence_row(result.to_dict(), enforce=False).status == "RECORD"


def test_time_to_target_counts_the_log_interval():
    steps = [(10, 1000.0, 9.0), (20, 1000.0, 8.0), (30, 1000.0, 6.0)]
    result = judge_convergence(steps, {}, "auto", 7.0)
    assert (result.steps_to_target, result.time_to_target_seconds) == (30, 30.0)
    assert seconds_until([(10, 1000.0), (20, None), (30, 1000.0)], 20) == 10.0
