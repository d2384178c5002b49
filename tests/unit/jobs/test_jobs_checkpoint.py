"""Checkpoint stage helpers (docs/reference_suite.md#checkpoint-save-and-resume)."""

from __future__ import annotations

import pytest

from cvs_tasks.jobs import (
    JobSetupError,
    checkpoint_dir,
    checkpoint_listing_command,
    cleanup_command,
    last_checkpoint_step,
    latest_checkpoint_check_command,
    parse_latest_checkpoint,
    resume_load_dir,
    save_iters_problem,
)


def test_single_node_dir_is_under_log_dir():
    assert checkpoint_dir("/home/alice/LOGS/megatron/", "", False) == (
        "/home/alice/LOGS/megatron/ckpt_primus")
    assert checkpoint_dir("/home/alice/LOGS", "/shared/ckpt", distributed=False) == (
        "/home/alice/LOGS/ckpt_primus")


def test_distributed_dir_is_the_configured_shared_dir():
    assert checkpoint_dir("/logs", "/nfs/ckpt/", True) == "/nfs/ckpt"


@pytest.mark.parametrize("configured", [None, "", "  ", "<changeme>", "/"])
def test_distributed_without_a_usable_dir_is_an_error_value(configured):
    err = checkpoint_dir("/logs", configured, True)
    assert isinstance(err, JobSetupError)
    assert err.field == "checkpoint.checkpoint_dir"


def test_latest_checkpoint_commands():
    assert latest_checkpoint_check_command("/nfs/ckpt/") == (
        "cat /nfs/ckpt/checkpoints/latest_checkpointed_iteration.txt")
    assert parse_latest_checkpoint("20\n") == 20
    assert parse_latest_checkpoint("cat: no such file\n") is None
    assert checkpoint_listing_command("/nfs/ckpt") == "ls -laR /nfs/ckpt 2>&1 | head -n 200"
    assert resume_load_dir("/nfs/ckpt/") == "/nfs/ckpt/checkpoints"


@pytest.mark.parametrize(("iters", "interval", "last"), [(21, 20, 20), (25, 5, 25), (9, 20, 0),
                                                          (41, 20, 40)])
def test_last_checkpoint_step(iters, interval, last):
    assert last_checkpoint_step(iters, interval) == last


def test_last_checkpoint_step_rejects_non_positive_interval():
    with pytest.raises(ValueError):
        last_checkpoint_step(21, 0)


def test_save_iters_problems():
    assert save_iters_problem(21, 20) is None
    assert "multiple of checkpoint.save_interval" in save_iters_problem(40, 20)
    assert "use e.g. 41" in save_iters_problem(40, 20)
    assert "no checkpoint would be written" in save_iters_problem(10, 20)
    assert "must be positive" in save_iters_problem(10, 0)


def test_cleanup_removes_whole_dir_single_only_checkpoints_distributed():
    assert cleanup_command("/logs/ckpt_primus", distributed=False) == "rm -rf -- /logs/ckpt_primus"
    assert cleanup_command("/nfs/ckpt/", distributed=True) == "rm -rf -- /nfs/ckpt/checkpoints"
    assert cleanup_command("/", distributed=False) is None
    assert cleanup_command("", distributed=True) is None
