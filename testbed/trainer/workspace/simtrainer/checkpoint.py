"""Real checkpoint files in Megatron's layout: `iter_XXXXXXX/` + `latest_checkpointed_iteration.txt`.

Every node writes its own shard; node 0 writes the metadata and, after all shards are in, the
tracker file, so a resume reads what a real job would find on shared storage.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

TRACKER = "latest_checkpointed_iteration.txt"


def iter_dir(root: Path, step: int) -> Path:
    return root / f"iter_{step:07d}"


def write_shard(root: Path, step: int, node_rank: int, payload: dict) -> None:
    target = iter_dir(root, step)
    target.mkdir(parents=True, exist_ok=True)
    shard = target / f"__{node_rank}_0.distcp"
    tmp = shard.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, sort_keys=True))
    os.replace(tmp, shard)


def write_metadata(root: Path, step: int, nnodes: int, payload: dict) -> None:
    target = iter_dir(root, step)
    target.mkdir(parents=True, exist_ok=True)
    (target / ".metadata").write_text(json.dumps({"step": step, "shards": nnodes}, sort_keys=True))
    (target / "common.pt").write_text(json.dumps(payload, sort_keys=True))
    (target / "metadata.json").write_text(json.dumps({"sharded_backend": "torch_dist",
                                                      "sharded_backend_version": 1}))


def write_tracker(root: Path, step: int) -> None:
    tmp = root / (TRACKER + ".tmp")
    tmp.write_text(f"{step}\n")
    os.replace(tmp, root / TRACKER)


def latest(root: Path) -> int | None:
    """The iteration the tracker names, if it and its directory exist."""
    tracker = root / TRACKER
    try:
        step = int(tracker.read_text().strip())
    except (OSError, ValueError):
        return None
    return step if iter_dir(root, step).is_dir() else None
