"""The built scripts and commands really behave in bash: detached launch, exit status, stop, checks.

Runs only local bash against stand-in launchers in a temp dir (no GPU, container or network).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from jobs_factory import CANARY_TOKEN, make_job, with_params

from cvs_tasks.jobs import (
    build_launch,
    experiment_header,
    gpu_pids_command,
    kill_pids_command,
    pick_existing_yaml,
    stop_job_command,
    tokenizer_download_command,
    yaml_check_command,
)

pytestmark = pytest.mark.skipif(
    not (shutil.which("bash") and shutil.which("setsid")), reason="needs bash and setsid")

FAKE_LLAMA3 = """\
if [ "$HF_TOKEN" = "$EXPECTED_TOKEN" ]; then echo token-ok; else echo token-wrong; fi
echo "MBS=$MBS BS=$BS NODE_RANK=$NODE_RANK FOO=$FOO LOG_DIR=$LOG_DIR"
if [ "${HANG:-0}" = 1 ]; then sleep 60 & wait; fi
exit 3
"""
FAKE_PRIMUS_CLI = """\
log=""
while [ $# -gt 0 ]; do if [ "$1" = --log_file ]; then log=$2; shift; fi; shift; done
echo "[direct] console only"
echo "iteration 1/ 2 | worker line NODE_RANK=$NODE_RANK" | tee "$log" > /dev/null
exit 0
"""


def sh(command: str, timeout: float = 20, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                          timeout=timeout, env=env)


def wait_for(path: str, timeout: float = 15) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and Path(path).read_text().strip():
            return Path(path).read_text().strip()
        time.sleep(0.05)
    raise AssertionError(f"{path} did not appear within {timeout}s")


def start(plan) -> None:
    for command in plan.prepare:
        assert sh(command).returncode == 0
    for node in plan.nodes:
        Path(node.script_path).write_text(node.script_text)
        os.chmod(node.script_path, 0o700)
        began = time.monotonic()
        assert sh(node.launch_command).returncode == 0
        assert time.monotonic() - began < 5  # returns at once, the job runs detached


@pytest.fixture
def site(tmp_path, monkeypatch):
    root = tmp_path / "Megatron-LM"
    (root / "examples/llama").mkdir(parents=True)
    (root / "examples/llama/train_llama3.sh").write_text(FAKE_LLAMA3)
    token = tmp_path / "hf_token"
    token.write_text(CANARY_TOKEN + "\n")
    token.chmod(0o600)
    monkeypatch.setenv("EXPECTED_TOKEN", CANARY_TOKEN)
    return tmp_path


def megatron_job(site: Path, **changes):
    job = make_job(runtime="host", hf_token_path=str(site / "hf_token"), log_dir=str(site / "logs"),
                   scripts_dir=str(site / "scripts"), data_cache_dir=str(site / "cache"),
                   rocm_dir="/opt/rocm", env={"FOO": "a b'c"}, **changes)
    return with_params(job, megatron_root=str(site / "Megatron-LM"))


def test_megatron_wrapper_runs_detached_and_records_the_exit_status(site):
    plan = build_launch(megatron_job(site, nnodes=2, distributed=True))
    start(plan)
    for node in plan.nodes:
        assert wait_for(node.exit_path) == "3"
        assert wait_for(node.pid_path).isdigit()
        log = Path(node.log_path).read_text()
        assert "token-ok" in log and CANARY_TOKEN not in log
        assert (f"MBS=4 BS=128 NODE_RANK={node.rank} FOO=a b'c LOG_DIR="
                f"{plan.combo_log_dir}/out-node{node.rank}") in log
    assert oct(os.stat(plan.nodes[0].script_path).st_mode & 0o777) == "0o700"
    assert oct(os.stat(Path(plan.nodes[0].script_path).parent).st_mode & 0o777) == "0o700"


def test_stop_ends_the_whole_group_and_the_wrapper_records_143(site):
    job = megatron_job(site, label="hang")
    job = dataclasses.replace(job, env={"FOO": "x", "HANG": "1"})
    plan = build_launch(job)
    start(plan)
    node = plan.nodes[0]
    pgid = int(wait_for(node.pid_path))
    deadline = time.monotonic() + 15  # the launcher printed: the wrapper's traps are set
    while "MBS=" not in (Path(node.log_path).read_text() if os.path.exists(node.log_path) else ""):
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.05)
    began = time.monotonic()
    assert sh(stop_job_command(node, grace_s=10)).returncode == 0
    assert time.monotonic() - began < 10
    assert wait_for(node.exit_path) == "143"
    alive = sh(f"ps -eo pgid=,stat= | awk '$1 == {pgid} && $2 !~ /^Z/' | wc -l")
    assert alive.stdout.strip() == "0"
    # A second stop (pid gone) and a stop with no pid file are harmless.
    assert sh(stop_job_command(node, grace_s=2)).returncode == 0
    os.remove(node.pid_path)
    missing = sh(stop_job_command(node, grace_s=2))
    assert missing.returncode == 0 and "nothing to stop" in missing.stderr


def test_primus_worker_output_in_training_log_console_apart(tmp_path):
    root = tmp_path / "Primus"
    (root / "runner").mkdir(parents=True)
    (root / "runner/primus-cli").write_text(FAKE_PRIMUS_CLI)
    job = make_job(backend="primus", runtime="host", hf_token_path=None, log_dir=str(tmp_path / "logs"),
                   scripts_dir=str(tmp_path / "scripts"), env={})
    plan = build_launch(with_params(job, primus_root=str(root)), experiment="x.yaml")
    start(plan)
    node = plan.nodes[0]
    assert wait_for(node.exit_path) == "0"
    assert Path(node.log_path).read_text() == "iteration 1/ 2 | worker line NODE_RANK=0\n"
    assert "[direct] console only" in Path(node.console_path).read_text()


def test_missing_root_is_reported_and_recorded(tmp_path):
    job = make_job(runtime="host", hf_token_path=None, log_dir=str(tmp_path / "logs"),
                   scripts_dir=str(tmp_path / "scripts"), rocm_dir="/opt/rocm", env={})
    plan = build_launch(with_params(job, megatron_root=str(tmp_path / "absent")))
    start(plan)
    assert wait_for(plan.nodes[0].exit_path) == "1"
    assert "cannot cd to" in Path(plan.nodes[0].log_path).read_text()


def test_yaml_check_against_real_files(tmp_path):
    found = tmp_path / "examples/megatron/configs/MI300X"
    found.mkdir(parents=True)
    (found / "m-FP8-pretrain.yaml").write_text(
        "work_group: ${PRIMUS_TEAM:amd}\nexp_name: exp-m-pretrain   # pinned\nworkspace: ${PRIMUS_WORKSPACE:./o}\n"
        "modules:\n  pre_trainer:\n    exp_name: nested-is-not-the-header\n")
    (found / "m-pretrain.yaml").write_text("exp_name: the-second-match-is-not-read\n")
    candidates = ["examples/megatron/configs/MI325X/m-FP8-pretrain.yaml",
                  "examples/megatron/configs/MI300X/m-FP8-pretrain.yaml",
                  "examples/megatron/configs/MI300X/m-pretrain.yaml"]
    out = sh(yaml_check_command(candidates, str(tmp_path))).stdout
    assert pick_existing_yaml(out) == candidates[1]
    assert experiment_header(out) == {"work_group": "${PRIMUS_TEAM:amd}", "exp_name": "exp-m-pretrain",
                                      "workspace": "${PRIMUS_WORKSPACE:./o}"}
    assert pick_existing_yaml(sh(yaml_check_command(candidates[:1], str(tmp_path))).stdout) is None


def _fake_cli(bin_dir: Path, writes_file: bool) -> dict:
    bin_dir.mkdir()
    body = ('while [ $# -gt 0 ]; do [ "$1" = --local-dir ] && d=$2; shift; done\n'
            + ('echo tok > "$d/tokenizer.model"\n' if writes_file else "")
            + '[ "$HF_TOKEN" = "$EXPECTED_TOKEN" ] || exit 9\n')
    cli = bin_dir / "huggingface-cli"
    cli.write_text("#!/bin/bash\n" + body)
    cli.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


@pytest.mark.parametrize("writes_file", [True, False])
def test_tokenizer_download_success_is_checked(site, writes_file):
    env = _fake_cli(site / "bin", writes_file)
    job = with_params(megatron_job(site), model_name="deepseek_v2_lite",
                      tokenizer_model="deepseek-ai/DeepSeek-V2-Lite")
    result = sh(tokenizer_download_command(job), env=env)
    assert (result.returncode == 0) is writes_file
    if not writes_file:
        assert "tokenizer download did not produce" in result.stderr


def test_gpu_pids_command_without_the_tool_is_quietly_ok():
    result = sh(gpu_pids_command("cvs-no-such-smi --showpids"))
    assert result.returncode == 0 and result.stdout == ""
    assert "not found" in result.stderr


def test_kill_pids_command_kills_and_waits():
    victim = subprocess.Popen(["sleep", "60"])
    try:
        result = sh(kill_pids_command([victim.pid], wait_s=5))
        assert result.returncode == 0
        assert victim.wait(timeout=5) == -9
    finally:
        if victim.poll() is None:
            victim.kill()
