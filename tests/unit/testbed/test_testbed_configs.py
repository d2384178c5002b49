"""The ready testbed configs: static files whose thresholds the simulated trainer actually meets."""
from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest
from simrun import PRIMUS_ROOT, megatron_cmd, primus_cmd, run_sim, sim_env

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = sorted((ROOT / "configs" / "testbed").glob("*.json"))


def _load(path: Path) -> tuple[dict, dict]:
    config = json.loads(path.read_text())
    thresholds = json.loads((path.parent / config["threshold_json"]).read_text())
    return config, thresholds


def _steady_values(text: str, label: str) -> list[float]:
    return [float(v) for v in re.findall(re.escape(label) + r":? ([0-9.]+)", text)][3:]


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_config_shape_and_threshold_cells_match_the_sweep(path):
    config, thresholds = _load(path)
    assert set(config["sweep"]["runs"]) == set(config["sweep"]["combinations"])
    assert set(config["sweep"]["runs"]) == {k for k in thresholds if not k.startswith("_")}
    assert config["watch"]["poll_interval_s"] <= 1.0 and config["smoke"]["enabled"]
    assert all(k.startswith(("SIM_", "MASTER_", "NCCL_", "GLOO_")) for k in config["container"]["env"])
    if config["container"]["runtime"]["name"] == "docker":
        # The harness runs Primus when the image name says so: Primus configs use that tag.
        expected = "cvs-testbed/sim:primus-latest" if "primus" in path.stem else "cvs-testbed/sim:latest"
        assert config["container"]["image"] == expected
        shared = config["container"]["runtime"]["args"]["volumes"][0].split(":")[0]
        for key in ("log_dir", "scripts_dir", "data_cache_dir"):
            assert config["paths"][key].startswith(shared + "/")
    else:
        assert config["train_params"]["megatron_root"].startswith("{cvs-root}/")


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_the_simulated_trainer_meets_the_config_thresholds(path, tmp_path):
    config, thresholds = _load(path)
    combo = config["sweep"]["runs"][0]
    mbs, gbs, precision = re.match(r"MBS=(\d+),GBS=(\d+),PRECISION=(\w+)", combo).groups()
    world = "16" if "distributed" in path.stem else "8"
    env = sim_env(**{**config["container"]["env"], "SIM_TIME_SCALE": "0.01", "GPUS_PER_NODE": world})
    if "primus" in path.stem:
        yaml = f"examples/megatron/configs/MI300X/{config['train_params']['model_name']}-{precision}-pretrain.yaml"
        run = run_sim(primus_cmd(yaml, "--micro_batch_size", mbs, "--global_batch_size", gbs, "--train_iters", "20"),
                      env, cwd=PRIMUS_ROOT)
        tflops = _steady_values(run.text, "compute per GPU (TFLOP/s/GPU)")
        tokens = _steady_values(run.text, "tokens/s/GPU inst/harmonic mean")
    else:
        env.update(MBS=mbs, BS=gbs, TOTAL_ITERS="20", TE_FP8="1" if precision == "FP8" else "0")
        run = run_sim(megatron_cmd(), env)
        tflops = _steady_values(run.text, "throughput per GPU (TFLOP/s/GPU)")
        tokens = [float(t) for t in re.findall(r"tokens/GPU/s: ([0-9.]+)", run.text)]
    assert run.code == 0, run.stdout[-1500:]
    elapsed = _steady_values(run.text, "elapsed time per iteration (ms)")
    cell = thresholds[combo]
    assert statistics.mean(tflops) >= cell["training.throughput_per_gpu"]["value"]
    assert statistics.mean(tokens) >= cell["training.tokens_per_gpu"]["value"]
    assert statistics.mean(elapsed) <= cell["training.elapsed_time_per_iteration"]["value"]
    # and a 3x slower node would fail the gate: the thresholds are not vacuous
    assert statistics.mean(tflops) / 3 < cell["training.throughput_per_gpu"]["value"]
