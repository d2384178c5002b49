"""`--dry-run` prints every command each node would run, in order, and leaves nothing behind:
NIC set-up, folders, scripts, launch, the stop and GPU clean-up after each job, both checkpoint
phases, teardown. Through the real CLI on packaged templates filled in as the README says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cvs_tasks.jobs.cleanup import DEFAULT_PIDS_COMMAND
from tests.filled_templates import filled

ROOT = Path(__file__).resolve().parents[3]


def _cluster(tmp_path: Path, hosts: list[str]) -> Path:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"username": "ops", "priv_key_file": str(tmp_path / "key"),
                                "node_dict": {h: {} for h in hosts}}))
    return path


def _invoke(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVOKE_CVS_")}
    env.update(TMPDIR=str(scratch), CVS_REPORTS_DIR=str(tmp_path / "reports"))
    proc = subprocess.run([sys.executable, "-m", "invoke", "-r", str(ROOT), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not list(scratch.iterdir()), "the dry run left its scratch folder behind"
    assert not (tmp_path / "reports").exists(), "a dry run wrote a run directory"
    return proc


def _index(lines: list[str], text: str, start: int = 0) -> int:
    return next(i for i, line in enumerate(lines) if i >= start and text in line)


def test_a_distributed_megatron_dry_run_lists_nic_setup_and_gpu_cleanup(tmp_path):
    config = filled(tmp_path, "mi3xx_megatron_llama-3.1-8b_distributed.json", master_addr="127.0.0.8")
    cluster = _cluster(tmp_path, ["127.0.0.8", "127.0.0.9"])
    lines = _invoke(tmp_path, "all", "--config", str(config), "--cluster", str(cluster),
                    "--dry-run").stdout.splitlines()
    for combo in json.loads(config.read_text())["sweep"]["runs"]:
        job = _index(lines, f"test_training[{combo}]: started")
        nic = _index(lines, "Broadcom NIC library set-up", job)
        for host in ("127.0.0.8", "127.0.0.9"):
            assert "libbnxt_re" in lines[_index(lines, f"[dry-run] {host}: docker exec", nic)]
        launch = _index(lines, "# node 1: launch", nic)
        stop = _index(lines, "stop what still runs", launch)
        cleanup = _index(lines, "GPU processes left", stop)
        tool = DEFAULT_PIDS_COMMAND.split()[0]
        assert all(tool in lines[cleanup + k] and "docker exec" in lines[cleanup + k] for k in (1, 2))
        assert nic < launch < stop < cleanup < _index(lines, f"test_training[{combo}]: SKIPPED", cleanup)
    teardown = _index(lines, "test_teardown: started")
    assert any("docker rm -f" in line for line in lines[teardown:])


def test_a_primus_dry_run_lists_both_checkpoint_phases(tmp_path):
    def enforce(cfg):
        cfg["checkpoint"] = dict(cfg.get("checkpoint") or {}, enforce=True)

    config = filled(tmp_path, "mi3xx_megatron_llama-3.1-8b_single.json", image="rocm/primus:v25.10", edit=enforce)
    cluster = _cluster(tmp_path, ["127.0.0.9"])
    out = _invoke(tmp_path, "checkpoint", "--config", str(config), "--cluster", str(cluster), "--dry-run").stdout
    save, check, resume = (out.index(t) for t in ("# primus job 'ckpt_save'", "latest_checkpointed_iteration.txt",
                                                  "# primus job 'ckpt_resume'"))
    assert save < check < resume
    assert "test_checkpoint: SKIPPED - dry run" in out


def test_chained_dry_run_tasks_share_one_scratch_run(tmp_path):
    config = filled(tmp_path, "mi3xx_megatron_llama-3.1-8b_single.json")
    cluster = _cluster(tmp_path, ["127.0.0.9"])
    out = _invoke(tmp_path, "container", "--dry-run", "--config", str(config), "--cluster", str(cluster),
                  "smoke", "--dry-run", "--config", str(config), "--cluster", str(cluster)).stdout
    assert out.count("docker run -d") == 1 and "launch_container: printed above (dry run)" in out
    assert out.count("/dry-run/smoke/node0.sh") >= 1


def test_the_dry_run_shows_the_hf_token_export_as_a_run_writes_it_never_the_token(tmp_path):
    token = tmp_path / "hf_token"
    token.write_text("hf_NotARealTokenButSecret42\n")
    config = filled(tmp_path, "mi3xx_megatron_llama-3.1-8b_single.json",
                    edit=lambda cfg: cfg["paths"].update(hf_token_file=str(token)))
    cluster = _cluster(tmp_path, ["127.0.0.9"])
    out = _invoke(tmp_path, "smoke", "--config", str(config), "--cluster", str(cluster), "--dry-run").stdout
    assert 'export HF_TOKEN="$(cat /home/ops/SCRIPTS/megatron/dry-run/hf_token)"' in out
    assert "hf_NotARealTokenButSecret42" not in out
