"""Packaged config templates filled in the way the README tells a user to (every <changeme>
replaced), for tests that run the real CLI on them with --dry-run."""

from __future__ import annotations

import json
from pathlib import Path

from cvs_tasks.config import copy_template

GPU = "MI300X"


def fill(path: Path, *, template: str | None = None, image: str = "rocm/megatron-lm:v25.9",
         master_addr: str | None = None, edit=None) -> Path:
    """Replace the copied template's <changeme> values in place: keep each example value next to a
    token, pick the MI300X thresholds, a real image name and 20 iterations."""
    data = json.loads(path.read_text(encoding="utf-8"))

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value.replace(" <changeme>", "") if isinstance(value, str) else value

    data = {k: (v if k == "_comment" else strip(v)) for k, v in data.items()}
    name = Path(template).stem if template else path.stem  # the copy may have been renamed
    stem = name.split("_", 1)[1] if "_" in name else name
    data.update(gpu_name=GPU, threshold_json=f"{GPU.lower()}_{stem}_threshold.json")
    data["container"]["image"] = image
    data["train_params"]["training_iterations"] = "20"
    if master_addr:
        data["container"]["env"]["MASTER_ADDR"] = master_addr
    volumes = data["container"]["runtime"]["args"].get("volumes", [])
    data["container"]["runtime"]["args"]["volumes"] = [v for v in volumes if "<changeme>" not in v]
    checkpoint = data.get("checkpoint") or {}
    if checkpoint.get("checkpoint_dir") == "<changeme>":  # a shared mount; unused while enforce is false
        checkpoint["checkpoint_dir"] = ""
    if edit:
        edit(data)
    left = json.dumps({k: v for k, v in data.items() if k != "_comment"})
    assert "<changeme>" not in left, left
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def filled(tmp_path: Path, template: str, **options) -> Path:
    """A copy of a packaged template (with its thresholds) in ``tmp_path``, filled in."""
    written = copy_template(template, tmp_path, with_thresholds=True)
    config = next(p for p in written if p.name == template)
    return fill(config, template=template, **options)
