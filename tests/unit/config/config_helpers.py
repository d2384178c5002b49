"""Plain-data builders for config tests: a minimal valid suite and a template filler."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FP8 = "MBS=4,GBS=128,PRECISION=FP8"
BF16 = "MBS=4,GBS=128,PRECISION=BF16"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "config"
CHANGEME = "<changeme>"


def minimal_config(**top: Any) -> dict[str, Any]:
    """A small suite config that loads cleanly next to `minimal_thresholds()` saved as thr.json."""
    config = {
        "gpu_name": "MI300X",
        "threshold_json": "thr.json",
        "paths": {"hf_token_file": "/home/{user-id}/.hf_token", "log_dir": "/home/{user-id}/LOGS",
                  "scripts_dir": "{log_dir}/scripts", "data_cache_dir": "/data/cache"},
        "container": {"name": "cvs_test", "image": "rocm/megatron-lm:test", "runtime": {"name": "docker"},
                      "env": {"NCCL_DEBUG": "ERROR"}},
        "train_params": {"model_name": "llama3.1_8B", "tokenizer_model": "meta-llama/Llama-3.1-8B",
                         "training_iterations": "5"},
        "sweep": {"combinations": {FP8: {"training_iterations": "20"}, BF16: {}}, "runs": [FP8, BF16]},
    }
    config.update(top)
    return config


def spec_cell(tflops: float = 300) -> dict[str, Any]:
    return {"training.throughput_per_gpu": {"kind": "min", "value": tflops},
            "training.mem_usage": {"kind": "max", "value": 0.9, "optional": True}}


def minimal_thresholds(*cells: str) -> dict[str, Any]:
    return {"_comment": "test", **{cell: spec_cell() for cell in (cells or (FP8, BF16))}}


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    return path


def fill_template(data: Any, *, gpu: str = "MI300X", config_name: str = "", path: str = "") -> Any:
    """Fill every `<changeme>` of a packaged template the way a site would."""
    if isinstance(data, dict):
        return {fill_key(k): fill_template(v, gpu=gpu, config_name=config_name, path=f"{path}.{k}".lstrip("."))
                for k, v in data.items()}
    if isinstance(data, list):
        return [fill_template(v, gpu=gpu, config_name=config_name, path=f"{path}[]") for v in data]
    if not isinstance(data, str) or CHANGEME not in data:
        return data
    if data != CHANGEME:
        return fill_key(data)
    rest = config_name.split("_", 1)[1].removesuffix(".json") if "_" in config_name else ""
    values = {
        "gpu_name": gpu,
        "threshold_json": f"{gpu.lower()}_{rest}_threshold.json",
        "container.image": "rocm/primus:v25.9" if "405b" in config_name else "rocm/megatron-lm:v25.9",
        "train_params.training_iterations": "20",
        "checkpoint.checkpoint_dir": "/shared/ckpt",
        "container.runtime.args.volumes[]": "/shared/ckpt:/shared/ckpt",
    }
    return values[path]


def fill_key(text: str) -> str:
    """`"enp193s0f1np1 <changeme>"` -> `"enp193s0f1np1"`: keep the example, drop the token."""
    return text.replace(" " + CHANGEME, "").replace(CHANGEME, "filled")
