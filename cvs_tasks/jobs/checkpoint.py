"""Commands and arithmetic of the Primus checkpoint save/resume stage; no I/O.

The stage as the reference runs it: docs/reference_suite.md#checkpoint-save-and-resume.

The continuity verdict itself lives in ``metrics``; this module only says where the checkpoint
goes, how to see what was saved, and which step the resume must start from.
"""

from __future__ import annotations

from cvs_tasks.jobs.primus import CHECKPOINTS_SUBDIR, resume_load_dir
from cvs_tasks.jobs.shell import q
from cvs_tasks.jobs.spec import JobSetupError

SINGLE_NODE_SUBDIR = "ckpt_primus"
LATEST_FILE = "latest_checkpointed_iteration.txt"

__all__ = [
    "checkpoint_dir",
    "checkpoint_listing_command",
    "cleanup_command",
    "last_checkpoint_step",
    "latest_checkpoint_check_command",
    "mkdir_command",
    "parse_latest_checkpoint",
    "resume_load_dir",
    "save_iters_problem",
]


def checkpoint_dir(log_dir: str, configured: str | None,
                   distributed: bool) -> str | JobSetupError:
    """Single node: ``<log_dir>/ckpt_primus``; distributed: ``checkpoint.checkpoint_dir`` (shared)."""
    if not distributed:
        return f"{log_dir.rstrip('/')}/{SINGLE_NODE_SUBDIR}"
    value = (configured or "").strip()
    if not value or "<changeme>" in value:
        return JobSetupError(
            "checkpoint.checkpoint_dir is required for the distributed checkpoint test: set it to "
            "a directory on storage shared by all nodes and mounted at the same path in the "
            "container (container.runtime.args.volumes)",
            field="checkpoint.checkpoint_dir",
        )
    if value.rstrip("/") == "":
        return JobSetupError("checkpoint.checkpoint_dir must not be '/'",
                             field="checkpoint.checkpoint_dir")
    return value.rstrip("/")


def latest_checkpoint_check_command(ckpt_dir: str) -> str:
    path = f"{ckpt_dir.rstrip('/')}/{CHECKPOINTS_SUBDIR}/{LATEST_FILE}"
    return f"cat {q(path)}"


def parse_latest_checkpoint(output: str) -> int | None:
    """The iteration number Primus wrote into latest_checkpointed_iteration.txt, if readable."""
    text = output.strip()
    return int(text) if text.isdigit() else None


def checkpoint_listing_command(ckpt_dir: str) -> str:
    """What to show the user when no checkpoint appeared (bounded: at most 200 lines)."""
    return f"ls -laR {q(ckpt_dir)} 2>&1 | head -n 200"


def mkdir_command(ckpt_dir: str) -> str:
    return f"mkdir -p {q(ckpt_dir)}"


def last_checkpoint_step(save_iters: int, save_interval: int) -> int:
    """The last step the save phase checkpoints: floor(save_iters / interval) * interval."""
    if save_interval <= 0:
        raise ValueError(f"save_interval must be positive, got {save_interval}")
    return (save_iters // save_interval) * save_interval


def save_iters_problem(save_iters: int, save_interval: int) -> str | None:
    """Primus YAMLs disable saving on the last iteration, so the last save must come earlier."""
    if save_interval <= 0:
        return f"checkpoint.save_interval must be positive, got {save_interval}"
    if save_iters < save_interval:
        return (f"checkpoint.save_iters ({save_iters}) is below checkpoint.save_interval "
                f"({save_interval}): no checkpoint would be written")
    if save_iters % save_interval == 0:
        return (f"checkpoint.save_iters ({save_iters}) is a multiple of checkpoint.save_interval "
                f"({save_interval}); the last iteration is not saved, use e.g. {save_iters + 1}")
    return None


def cleanup_command(ckpt_dir: str, *, distributed: bool) -> str | None:
    """Single node removes the whole dir; distributed only its ``checkpoints`` (shared storage)."""
    base = ckpt_dir.rstrip("/")
    if not base:
        return None
    target = f"{base}/{CHECKPOINTS_SUBDIR}" if distributed else base
    return f"rm -rf -- {q(target)}"
