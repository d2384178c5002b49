"""Run the simulated trainer as a subprocess, straight from the repo checkout (no Docker)."""
from __future__ import annotations

import os
import re
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

WORKSPACE = Path(__file__).resolve().parents[3] / "testbed" / "trainer" / "workspace"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
ITERATION = re.compile(r"iteration\s+(\d+)/\s*(\d+) \|.*elapsed time per iteration \(ms\): ([0-9.]+)")
LOSS = re.compile(r"\blm loss: ([0-9.E+-]+)")


@dataclass
class SimRun:
    code: int
    stdout: str

    @property
    def text(self) -> str:
        return ANSI.sub("", self.stdout)

    def iterations(self) -> list[int]:
        return [int(m.group(1)) for m in ITERATION.finditer(self.text)]

    def losses(self) -> dict[int, float]:
        out = {}
        for line in self.text.splitlines():
            it, loss = ITERATION.search(line), LOSS.search(line)
            if it and loss:
                out[int(it.group(1))] = float(loss.group(1))
        return out


FAST = {"SIM_STEP_MS": "1600", "SIM_TIME_SCALE": "0.01", "SIM_STARTUP_S": "0"}


def sim_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIM_", "PRIMUS_", "NNODES", "NODE_RANK",
                                                                    "MASTER_", "TRAIN_LOG"))}
    env.update(FAST)
    env.update(extra)
    return env


def megatron_cmd(script: str = "examples/llama/train_llama3.sh") -> list[str]:
    return ["bash", str(WORKSPACE / "Megatron-LM" / script)]


def primus_cmd(config: str, *args: str, log_file: Path | None = None) -> list[str]:
    cmd = ["bash", str(WORKSPACE / "Primus" / "runner" / "primus-cli"), "direct"]
    if log_file:
        cmd += ["--log_file", str(log_file)]
    return cmd + ["--", "train", "pretrain", "--config", config, *args]


def run_sim(cmd: list[str], env: dict, cwd: Path | None = None, timeout: float = 60) -> SimRun:
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return SimRun(done.returncode, done.stdout + done.stderr)


def start_sim(cmd: list[str], env: dict, cwd: Path | None = None) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def free_port(address: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]


PRIMUS_ROOT = WORKSPACE / "Primus"
