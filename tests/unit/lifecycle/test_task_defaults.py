"""Where --config, --cluster and --reports-dir come from when a command leaves them out.

Order: the flag, Invoke's configuration (`cvs.*` in invoke.yaml, INVOKE_CVS_*), the latest run's
manifest, and for the cluster last the repo's cluster/cluster.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from invoke import Config, Context

from cvs_tasks.lifecycle.session import RunRequest, open_session
from cvs_tasks.run.events import Message
from cvs_tasks.tasks._common import configured
from cvs_tasks.tasks.lifecycle import request

ROOT = Path(__file__).resolve().parents[3]
DEMO_CONFIG = ROOT / "configs" / "testbed" / "demo_host.json"
LOCAL_CLUSTER = ROOT / "cluster" / "localhost.json"


def _context(**cvs) -> Context:
    return Context(Config(overrides={"cvs": cvs}))


def test_a_flag_wins_over_invoke_configuration():
    c = _context(config="from-yaml.json", cluster="k.json")
    assert configured(c, "config", "flag.json") == "flag.json"
    assert configured(c, "cluster", None) == "k.json"
    assert configured(c, "reports_dir", None) is None
    assert configured(Context(Config()), "config", None) is None


def test_request_reads_the_cvs_section():
    req = request(_context(config="a.json", cluster="k.json", reports_dir="/r"))
    assert (req.config, req.cluster, req.reports_dir) == ("a.json", "k.json", "/r")
    req = request(_context(config="a.json"), config="b.json", cluster="c.json")
    assert (req.config, req.cluster) == ("b.json", "c.json")


def test_the_repo_cluster_file_is_the_last_default(tmp_path, monkeypatch):
    """`invoke all --config x.json` as typed: the cluster comes from cluster/cluster.json."""
    (tmp_path / "cluster").mkdir()
    (tmp_path / "cluster" / "cluster.json").write_text(LOCAL_CLUSTER.read_text())
    monkeypatch.chdir(tmp_path)
    said: list[Message] = []
    session = open_session(RunRequest(config=str(DEMO_CONFIG), dry_run=True, new=True), listener=said.append)
    try:
        assert [h.address for h in session.plan.hosts] == ["localhost"]
        assert session.plan.cluster.path == Path("cluster/cluster.json")
        assert any("cluster/cluster.json (the default" in m.text for m in said)
    finally:
        session.close()


def test_no_cluster_anywhere_says_every_way_to_give_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    try:
        open_session(RunRequest(config=str(DEMO_CONFIG), dry_run=True, new=True))
    except Exception as exc:  # noqa: BLE001 - the message is what is tested
        text = str(exc)
    else:
        raise AssertionError("a run without any cluster file was accepted")
    assert "--cluster" in text and "INVOKE_CVS_CLUSTER" in text and "cluster/cluster.json" in text


def _invoke(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", "-r", str(ROOT), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def _clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVOKE_CVS_")}
    env["HOME"] = str(home)
    return env


def test_the_real_invoke_reads_environment_and_user_yaml(tmp_path):
    """Through Invoke's own loading: INVOKE_CVS_CLUSTER, then ~/.invoke.yaml's `cvs:` section."""
    cluster = tmp_path / "mine.json"
    cluster.write_text(json.dumps({"username": "ops", "priv_key_file": str(tmp_path / "id_ed25519"),
                                   "node_dict": {"127.0.0.9": {}}}))
    env = _clean_env(tmp_path)
    args = ["all", "--config", str(DEMO_CONFIG), "--dry-run"]
    proc = _invoke(args, tmp_path, dict(env, INVOKE_CVS_CLUSTER=str(cluster)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[dry-run] 127.0.0.9:" in proc.stdout
    (tmp_path / ".invoke.yaml").write_text(f"cvs:\n  cluster: {LOCAL_CLUSTER}\n")
    proc = _invoke(args, tmp_path, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[dry-run] localhost:" in proc.stdout and "127.0.0.9" not in proc.stdout
