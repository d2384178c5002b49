"""Hostile files where the harness expects a config, a threshold, a cluster, a token or a known_hosts
file: a FIFO, /dev/zero, a directory, a file over the size limit, non-UTF-8 bytes. Each is refused at
once (no hang: the CLI runs under a timeout), exit 2, the file named, no traceback; and hostile
run ids (`..`, a newline) are refused before anything is written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cvs_tasks.errors import BadInput
from cvs_tasks.inputs import LIMITS
from cvs_tasks.run.rundir import check_run_flag
from tests.hostile.hostile_helpers import LOCAL_CLUSTER, TOKEN, assert_refused


def hostile_file(kind: str, folder: Path, name: str) -> Path:
    path = folder / name
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        return Path("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    elif kind == "oversize":
        path.write_bytes(b" " * (LIMITS["config"].max_bytes + 1))
    elif kind == "non-utf8":
        path.write_bytes(b'{"a": "\xff\xfe"}')
    return path


KINDS = {"fifo": "FIFO", "device": "a device", "directory": "a directory", "oversize": "limit", "non-utf8": "not UTF-8"}


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_hostile_config_file_is_refused_at_once(sandbox, kind):
    config = hostile_file(kind, sandbox.root, "hostile_single.json")
    for res in (sandbox.validate(config), sandbox.dry_run(config)):
        assert_refused(res, str(config), KINDS[kind])
    assert sandbox.written() == []


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_hostile_cluster_file_is_refused_at_once(sandbox, kind):
    cluster = hostile_file(kind, sandbox.root, "cluster.json")
    assert_refused(sandbox.validate(sandbox.config(), cluster), str(cluster), KINDS[kind])


@pytest.mark.parametrize("kind", ["fifo", "directory", "non-utf8"])
def test_a_hostile_threshold_file_is_refused_at_once(sandbox, kind):
    thresholds = hostile_file(kind, sandbox.root, "t_threshold.json")
    config = sandbox.config(lambda cfg: cfg.update(threshold_json=str(thresholds)))
    res = sandbox.validate(config)
    assert res.code == 2 and "Traceback" not in res.text, res.text


@pytest.mark.parametrize("kind", ["fifo", "device", "non-utf8", "directory"])
def test_a_hostile_token_file_is_refused_before_anything_runs(sandbox, kind):
    token = hostile_file(kind, sandbox.root, "token")
    config = sandbox.config(lambda cfg: cfg["paths"].update(hf_token_file=str(token)))
    res = sandbox.dry_run(config)
    assert_refused(res, "paths.hf_token_file")
    assert sandbox.written() == []


def test_a_token_over_the_secret_limit_is_refused(sandbox):
    sandbox.token.write_text(TOKEN * (LIMITS["secret"].max_bytes // len(TOKEN) + 1))
    assert_refused(sandbox.dry_run(sandbox.config()), "paths.hf_token_file", "limit")


@pytest.mark.parametrize("line", ["garbage", "127.0.0.99 ssh-ed25519 ***not-base64***",
                                  "127.0.0.99 ssh-ed25519\x1b[2J AAAA"])
def test_a_malformed_known_hosts_is_exit_2_with_file_and_line(sandbox, line):
    known = sandbox.root / "known_hosts"
    known.write_text(f"# site keys\n{line}\n")
    cluster = sandbox.root / "cluster.json"
    cluster.write_text(json.dumps({"username": "root", "priv_key_file": "/nonexistent", "known_hosts": str(known),
                                   "node_dict": {"127.0.0.99": {}}}))
    res = sandbox.cli("cluster.check", "--cluster", str(cluster), "--connect-timeout", "2")
    assert_refused(res, f"{known}: line 2")


def test_a_fifo_known_hosts_does_not_hang_trust(sandbox):
    known = hostile_file("fifo", sandbox.root, "known_hosts")
    cluster = sandbox.root / "cluster.json"
    cluster.write_text(json.dumps({"username": "root", "priv_key_file": "/nonexistent", "known_hosts": str(known),
                                   "node_dict": {"127.0.0.99": {}}}))
    assert_refused(sandbox.cli("cluster.trust", "--cluster", str(cluster), "--timeout", "2"), "FIFO")


HOSTILE_RUN_IDS = ["..", ".", "r1\ntouch x #", "a/..", "r1 r2", "-rf", "\u202egnp.exe", "x" * 129]


@pytest.mark.parametrize("run_id", HOSTILE_RUN_IDS)
def test_a_hostile_run_id_is_refused_by_a_dry_run_before_anything_is_written(sandbox, run_id):
    assert_refused(sandbox.dry_run(sandbox.config(), LOCAL_CLUSTER, "--run", run_id), "--run")
    assert sandbox.written() == []


@pytest.mark.parametrize("run_id", HOSTILE_RUN_IDS)
def test_the_run_flag_check_refuses_every_hostile_id(run_id):
    with pytest.raises(BadInput, match="--run"):
        check_run_flag(run_id)


@pytest.mark.parametrize("run_id", ["a/..", "r1\ntouch x #"])
def test_every_command_taking_a_run_id_refuses_it_before_anything_is_written(sandbox, run_id):
    """Every command checks `--run` with one function (`run.rundir.check_run_flag`), so two ids (a
    path, a shell line) show each command goes through it; the dry run and the in-process test
    take every hostile id."""
    for res in (sandbox.cli("all", "--config", str(sandbox.config()), "--cluster", str(LOCAL_CLUSTER), "--run", run_id),
                sandbox.cli("report", "--run", run_id),
                sandbox.cli("cleanup", "--cluster", str(LOCAL_CLUSTER), "--config", str(sandbox.config()),
                            "--run", run_id),
                sandbox.cli("teardown", "--config", str(sandbox.config()), "--cluster", str(LOCAL_CLUSTER),
                            "--run", run_id)):
        assert_refused(res, "--run")
    assert sandbox.written() == []
    assert not (sandbox.root.parent / "run.json").exists()


@pytest.mark.parametrize("tamper", [
    lambda run: (run / "run.json").write_text("[" * 100_000),
    lambda run: (run / "run.json").write_text('{"combos": 5, "hosts": {"a": 1}}'),
    lambda run: (run / "stages" / "smoke.json").write_text('{"stage": 1, "status": ["PASS"], "metrics": "x"}'),
    lambda run: (run / "stages" / "training[x].json").write_text('{"stage": "training", "status": "PASS", '
                                                                 '"nodes": [{"host": 1}]}'),
    lambda run: os.mkfifo(run / "stages" / "metric.json"),
], ids=["deep-manifest", "wrong-types-manifest", "wrong-types-record", "bad-node", "fifo-record"])
def test_a_tampered_run_directory_is_an_error_not_a_traceback(sandbox, tamper):
    run = sandbox.reports / "r1"
    (run / "stages").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"run_id": "r1", "combos": ["C"]}))
    (run / "stages" / "launch_container.json").write_text(json.dumps({"stage": "launch_container", "status": "PASS"}))
    tamper(run)
    res = sandbox.cli("report", "--run", "r1", timeout=60)
    assert res.code in (0, 1, 2, 3) and "Traceback" not in res.text, res.text[-3000:]


@pytest.mark.parametrize("cluster, where", [
    ({"username": "root", "priv_key_file": "/k", "node_dict": {"10.0.0.1\ntouch x": {}}}, "node_dict"),
    ({"username": "root", "priv_key_file": "/k", "node_dict": ["-oProxyCommand=touch_x"]}, "node_dict[0]"),
    ({"username": "-oProxyCommand=x", "priv_key_file": "/k", "node_dict": ["10.0.0.1"]}, "username"),
    ({"username": "root", "priv_key_file": "/k", "node_dict": {"10.0.0.1": {"address": "a b"}}}, "node_dict"),
])
def test_hostile_cluster_names_are_refused(sandbox, cluster, where):
    path = sandbox.root / "cluster.json"
    path.write_text(json.dumps(cluster))
    assert_refused(sandbox.validate(sandbox.config(), path), f"{path}", where)
    assert sandbox.written() == []


@pytest.mark.parametrize("task, flag", [("cluster.trust", "--timeout"), ("cluster.check", "--connect-timeout")])
@pytest.mark.parametrize("value", ["abc", "-5", "0", "1e999", "nan", "٣"])
def test_a_hostile_seconds_flag_is_exit_2(sandbox, task, flag, value):
    assert_refused(sandbox.cli(task, "--cluster", str(LOCAL_CLUSTER), flag, value), flag)
