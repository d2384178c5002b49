"""A sandbox for hostile-input tests: a copy of the demo config (host runtime, localhost) whose every
path is inside one temporary folder, and the CLI run in a subprocess with its own TMPDIR and
reports folder, so a test can assert what was written, and where."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "configs" / "testbed" / "demo_host.json"
DEMO_THRESHOLDS = REPO / "thresholds" / "testbed" / "demo_host_threshold.json"
LOCAL_CLUSTER = REPO / "cluster" / "localhost.json"
TOKEN = "hf_CANARYhostile0123456789abcdefABCDEF"
KEYS = ("MBS=2,GBS=16,PRECISION=BF16", "MBS=2,GBS=16,PRECISION=FP8")


@dataclass
class Cli:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


class Sandbox:
    """Everything a hostile run may touch lives under ``root``: reports, TMPDIR, node folders."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.reports = root / "reports"
        self.tmp = root / "tmp"
        self.node = root / "node"
        for folder in (self.reports, self.tmp):
            folder.mkdir(parents=True, exist_ok=True)
        self.token = root / "hf_token"
        self.token.write_text(TOKEN + "\n")

    def config(self, edit: Callable[[dict], None] | None = None, *, name: str = "hostile_single.json",
               thresholds: Callable[[dict], None] | None = None, raw: Callable[[str], str] | None = None) -> Path:
        cfg = json.loads(DEMO.read_text())
        cfg["paths"].update(hf_token_file=str(self.token), log_dir=str(self.node / "logs"),
                            scripts_dir=str(self.node / "scripts"), data_cache_dir=str(self.node / "cache"))
        thr = json.loads(DEMO_THRESHOLDS.read_text())
        if thresholds is not None:
            thresholds(thr)
        thr_path = self.root / "hostile_threshold.json"
        thr_path.write_text(json.dumps(thr, indent=1))
        cfg["threshold_json"] = str(thr_path)
        if edit is not None:
            edit(cfg)
        text = json.dumps(cfg, indent=1)
        path = self.root / name
        path.write_text(raw(text) if raw else text)
        return path

    def cli(self, *args: str, timeout: float = 120, env: dict[str, str] | None = None) -> Cli:
        env = dict(os.environ, CVS_REPORTS_DIR=str(self.reports), TMPDIR=str(self.tmp), COLUMNS="160", **(env or {}))
        proc = subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        return Cli(proc.returncode, proc.stdout, proc.stderr)

    def validate(self, config: Path, cluster: Path = LOCAL_CLUSTER) -> Cli:
        return self.cli("config.validate", "--config", str(config), "--cluster", str(cluster))

    def dry_run(self, config: Path, cluster: Path = LOCAL_CLUSTER, *extra: str) -> Cli:
        return self.cli("all", "--dry-run", "--config", str(config), "--cluster", str(cluster), *extra)

    def written(self) -> list[Path]:
        """Files a refused command left in the reports folder, TMPDIR or the node folders."""
        found = []
        for folder in (self.reports, self.tmp, self.node):
            if folder.exists():
                found += [p for p in folder.rglob("*")]
        return found


def assert_refused(res: Cli, *expected: str) -> None:
    """Exit 2, the expected words, no traceback, no secret on the console."""
    assert res.code == 2, (res.code, res.text[-3000:])
    assert "Traceback" not in res.text, res.text[-3000:]
    assert TOKEN not in res.text
    for words in expected:
        assert words in res.text, (words, res.text[-3000:])


def one_short_combo(megatron_root: Path) -> Callable[[dict], None]:
    """A config edit: the first combo alone, 6 iterations, no smoke, on the given launcher tree."""
    def edit(cfg: dict) -> None:
        cfg["train_params"]["megatron_root"] = str(megatron_root)
        cfg["train_params"]["training_iterations"] = "6"
        cfg["smoke"]["enabled"] = False
        cfg["loss_curve"]["milestone_steps"] = [3, 6]
        cfg["sweep"]["runs"] = cfg["sweep"]["runs"][:1]
        for body in cfg["sweep"]["combinations"].values():
            body["training_iterations"] = "6"

    return edit
