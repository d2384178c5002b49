"""A dry run tells assumed from known: the Primus experiment YAML and the checkpoint folder are only
known once node 0 answers, so every line holding the dry run's guess (`--config`, the `rm -rf` of
the checkpoints, the check of what was saved, `--load`) ends with a shell comment giving the rule a
run resolves it by; the line itself still parses as the command it was. Through the real CLI."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from cvs_tasks.remote.dryrun import ASSUMED, mark_assumed
from tests.filled_templates import filled

ROOT = Path(__file__).resolve().parents[3]


def _dry_run(tmp_path: Path, stage: str, config: Path) -> list[str]:
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"username": "ops", "priv_key_file": str(tmp_path / "key"),
                                   "node_dict": {"127.0.0.9": {}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVOKE_CVS_")}
    env.update(CVS_REPORTS_DIR=str(tmp_path / "reports"))
    proc = subprocess.run([sys.executable, "-m", "invoke", "-r", str(ROOT), stage, "--config", str(config),
                           "--cluster", str(cluster), "--dry-run"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.splitlines()


def _primus_config(tmp_path: Path, precision: str = "BF16") -> Path:
    def edit(cfg):
        cfg["checkpoint"] = dict(cfg.get("checkpoint") or {}, enforce=True)
        cfg["smoke"] = dict(cfg.get("smoke") or {}, precision=precision)

    return filled(tmp_path, "mi3xx_megatron_llama-3.1-8b_single.json", image="rocm/primus:v25.10", edit=edit)


def test_the_primus_checkpoint_dry_run_marks_every_line_resolved_on_the_node(tmp_path):
    lines = _dry_run(tmp_path, "checkpoint", _primus_config(tmp_path))
    marked = [line for line in lines if ASSUMED in line]
    folder = "/home/ops/LOGS/megatron/ckpt_primus"
    wipe = next(line for line in lines if "rm -rf --" in line and f"{folder}/" in line)
    saved = next(line for line in lines if "latest_checkpointed_iteration.txt" in line and line.startswith("[dry-run]"))
    save, resume = (line for line in lines if "primus-cli direct" in line)
    assert {wipe, saved, save, resume} == set(marked)
    yaml_rule = ("--config is the first of examples/megatron/configs/MI300X/llama3.1_8B-BF16-pretrain.yaml, "
                 "examples/megatron/configs/MI300X/llama3.1_8B-pretrain.yaml, examples/megatron/configs/"
                 "llama3.1_8B-pretrain.yaml that exists in /workspace/Primus")
    folder_rule = "the checkpoints folder is <workspace>/<work_group>/<user_name>/<exp_name>/checkpoints"
    assert yaml_rule in save and folder_rule not in save
    assert yaml_rule in resume and folder_rule in resume and f"--load {folder}/checkpoints" in resume
    assert folder_rule in wipe and folder_rule in saved and f"with workspace {folder}" in wipe
    for line in marked:  # the comment changes nothing the shell runs
        command, _, _ = line.partition("  " + ASSUMED)
        assert shlex.split(line, comments=True) == shlex.split(command)
    assert not any(ASSUMED in line for line in lines if "export PRIMUS_WORKSPACE" in line or "docker run" in line)


def test_an_fp8_smoke_dry_run_says_the_first_yaml_names_the_precision_and_older_ones_take_fp8_hybrid(tmp_path):
    lines = _dry_run(tmp_path, "smoke", _primus_config(tmp_path, "FP8"))
    launch = next(line for line in lines if "primus-cli direct" in line)
    assert "--config examples/megatron/configs/MI300X/llama3.1_8B-FP8-pretrain.yaml" in launch
    assert "--fp8 hybrid" not in launch.partition(ASSUMED)[0]
    assert "a YAML without the precision in its name (Primus up to v0.5) takes --fp8 hybrid for FP8" in launch


def test_mark_assumed_appends_each_rule_once_and_leaves_other_lines_alone():
    assumed = {"/ckpt/checkpoints": "the folder rule", "--config a.yaml": "the yaml rule", "": "never"}
    assert mark_assumed("mkdir -p /ckpt", assumed) == "mkdir -p /ckpt"
    assert mark_assumed("cp /ckpt/checkpoints /ckpt/checkpoints/x", assumed) == \
        f"cp /ckpt/checkpoints /ckpt/checkpoints/x  {ASSUMED}the folder rule"
    both = mark_assumed("run --config a.yaml --load /ckpt/checkpoints", assumed)
    assert both.endswith(f"{ASSUMED}the folder rule; the yaml rule")
