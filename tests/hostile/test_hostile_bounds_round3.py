"""Round 3 of the hostile inputs (issue #29): bounded work and memory, and a history that is never
needed to finish a run.

Every flag case is exit 2 with one line and no traceback; a malformed config or stage record is
refused in time linear in its size; a damaged history (garbage, truncated, a directory or a FIFO in
its place, another schema, a path that cannot be opened, no permission) is a warning for `compare`,
`report` and a run's baseline gate, and exit 3 (infrastructure, the README's exit table) for
`history`, which has nothing else to show.
"""

from __future__ import annotations

import json
import socket
import time

import pytest

from tests.hostile.hostile_helpers import KEYS, LOCAL_CLUSTER, Cli, assert_refused
from tests.unit.history.damage import DAMAGE, damage, healthy_bytes, root_ignores_permissions
from tests.unit.history.runs import make_run

RUN_A, RUN_B = "20260101-000000-aaaa", "20260102-000000-bbbb"


def one_line_refusal(res: Cli, *words: str) -> None:
    assert_refused(res, *words)
    assert len(res.text.strip().splitlines()) == 1, res.text


# --- flags -----------------------------------------------------------------------------------------

def calibrate_args(sandbox, *extra: str) -> tuple[str, ...]:
    return ("thresholds.calibrate", "--config", str(sandbox.config()), "--cluster", str(LOCAL_CLUSTER),
            "--output", str(sandbox.root / "calibrated_threshold.json"), *extra)


@pytest.mark.parametrize("extra, words", [
    (("--runs", "abc"), "--runs: 'abc' is not a whole number"),
    (("--runs", "0"), "--runs: '0' is out of range"),
    (("--min-runs", "2.5"), "--min-runs: '2.5' is not a whole number"),
    (("--margin-pct", "nan"), "--margin-pct: 'nan' is not a finite number"),
    (("--margin-pct", "inf"), "--margin-pct: 'inf' is not a finite number"),
    (("--margin-pct", "-5"), "--margin-pct: '-5' is out of range"),
    (("--margin-pct", "1e999"), "--margin-pct: '1e999' is out of range"),
])
def test_a_bad_calibrate_number_is_exit_2_naming_the_flag(sandbox, extra, words):
    one_line_refusal(sandbox.cli(*calibrate_args(sandbox, *extra)), words)
    assert not (sandbox.root / "calibrated_threshold.json").exists()


@pytest.mark.parametrize("value, words", [("abc", "--limit: 'abc' is not a whole number"),
                                          ("-1", "--limit: '-1' is out of range"), ("1e3", "not a whole number")])
def test_a_bad_history_limit_is_exit_2_naming_the_flag(sandbox, value, words):
    one_line_refusal(sandbox.cli("history", "--limit", value), words)


def test_calibrate_keeps_an_existing_output_unless_forced(sandbox):
    out = sandbox.root / "calibrated_threshold.json"
    out.write_text('{"hand": "tuned"}')
    one_line_refusal(sandbox.cli(*calibrate_args(sandbox)), f"{out} exists", "--force")
    assert out.read_text() == '{"hand": "tuned"}'
    res = sandbox.cli(*calibrate_args(sandbox, "--force"))  # past the guard: no history yet, no passing run: exit 2
    assert res.code == 2 and "--force" not in res.text and "Traceback" not in res.text, res.text
    assert "only 0 passing run(s)" in res.text


@pytest.mark.parametrize("parent", ["a\nb", "tab\there", "esc\x1b[2J", "cr\rx"])
def test_a_control_character_in_a_parent_of_the_run_path_is_refused(sandbox, parent):
    run = sandbox.root / parent / "20260101-000000-abcd"
    for res in (sandbox.dry_run(sandbox.config(), LOCAL_CLUSTER, "--run", str(run)),
                sandbox.cli("report", "--run", str(run))):
        assert_refused(res, "--run", "control character")
    assert sandbox.written() == []


def test_a_poll_interval_of_1e308_is_refused_by_config_validate(sandbox):
    config = sandbox.config(lambda cfg: cfg.setdefault("watch", {}).update(poll_interval_s=1e308))
    assert_refused(sandbox.validate(config), str(config), "watch.poll_interval_s", "3600")


# --- bounded work ----------------------------------------------------------------------------------

def test_malformed_configs_are_refused_in_linear_time(sandbox):
    """An unterminated string of escaped quotes: 75 s for 80 KB before (quadratic), now the CLI's start-up."""
    took = {}
    for size in (80_000, 320_000):
        path = sandbox.root / f"malformed_{size}.json"
        path.write_text('{"gpu_name": "' + '\\"' * (size // 2))
        start = time.monotonic()
        res = sandbox.validate(path)
        took[size] = time.monotonic() - start
        assert_refused(res, str(path), "line 1 column 14", "Unterminated string")
    assert took[320_000] < 15, took  # the quadratic scan took minutes; start-up is a few seconds when loaded


def test_a_bad_stage_record_is_skipped_in_linear_time(sandbox):
    run = make_run(sandbox.reports, RUN_A, created=1.0)
    (run.stages_dir / "smoke.json").write_text('{"stage": "' + '\\"' * 20_000)  # 40 KB: 17 s before
    start = time.monotonic()
    res = sandbox.cli("report", "--run", RUN_A)
    assert time.monotonic() - start < 15
    assert res.code == 1 and "Traceback" not in res.text, res.text  # the unreadable smoke record is NOT-RUN
    smoke = next(t for t in json.loads((run.path / "results.json").read_text())["tests"] if t["stage"] == "smoke")
    assert smoke["status"] == "NOT-RUN"


# --- a damaged history -----------------------------------------------------------------------------

@pytest.fixture(params=DAMAGE)
def damaged_history(request, sandbox) -> tuple[object, str]:
    """Two recorded runs, then the database damaged; (sandbox, the path to pass as --history)."""
    if request.param == "permission" and root_ignores_permissions():
        pytest.skip("root reads a mode-000 file")
    for run_id, created in ((RUN_A, 1.0), (RUN_B, 2.0)):
        make_run(sandbox.reports, run_id, created=created)
    db = damage(sandbox.reports / "history.sqlite", request.param, healthy_bytes(sandbox.root))
    return sandbox, str(db)


def test_history_says_unreadable_and_exits_3(damaged_history):
    sandbox, db = damaged_history
    res = sandbox.cli("history", "--history", db)
    assert res.code == 3 and "Traceback" not in res.text, res.text
    assert res.err.strip().startswith("history unreadable: ") and db in res.err
    assert len(res.text.strip().splitlines()) == 1, res.text


def test_compare_warns_and_compares_the_run_directories(damaged_history):
    sandbox, db = damaged_history
    res = sandbox.cli("compare", RUN_A, RUN_B, "--history", db, "--json")
    assert res.code == 0 and "Traceback" not in res.text, res.text
    assert res.err.strip().startswith("warning: history unreadable: ") and db in res.err
    assert json.loads(res.out)["run_a"] == RUN_A


def test_report_warns_and_renders(damaged_history):
    sandbox, db = damaged_history
    res = sandbox.cli("report", "--run", RUN_B, "--history", db)
    assert res.code == 0 and "Traceback" not in res.text, res.text  # the run passed: exit 0 as without a history
    assert "warning: history unreadable: " in res.err and db in res.err
    assert (sandbox.reports / RUN_B / "report.html").is_file()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_run_with_a_baseline_gate_finishes_on_a_damaged_history(sandbox):
    """The metric stage reads the history for a `baseline` threshold: a database of another schema
    (which crashed the stage) is a warning and a RECORD row saying why, and the run finishes, is
    reported and passes; the database is left as it was."""
    db = damage(sandbox.root / "history.sqlite", "wrong_schema", healthy_bytes(sandbox.root))
    before = db.read_bytes()
    key = KEYS[0]

    def edit(cfg):
        cfg["train_params"]["training_iterations"] = "6"
        cfg["smoke"]["enabled"] = False
        cfg["loss_curve"]["milestone_steps"] = [3, 6]
        cfg["sweep"]["runs"] = [key]
        cfg["sweep"]["combinations"][key]["training_iterations"] = "6"
        cfg["container"]["env"]["MASTER_PORT"] = str(free_port())
        cfg["history"] = {"path": str(db)}
        cfg["convergence"]["target_value"] = 0  # 6 steps reach no loss target; this run gates the rest

    def baseline(thr):  # the only gate: the simulated step times grow with the machine's load
        thr[key] = {"training.throughput_per_gpu": {"kind": "baseline", "tolerance_pct": 10}}

    res = sandbox.cli("all", "--config", str(sandbox.config(edit, thresholds=baseline)),
                      "--cluster", str(LOCAL_CLUSTER), timeout=300)
    assert "Traceback" not in res.text, res.text[-3000:]
    assert res.code == 0, res.text[-3000:]
    assert "history unreadable" in res.text
    [run] = [p for p in sandbox.reports.iterdir() if p.is_dir() and not p.is_symlink()]
    [record] = run.glob("stages/metric*.json")
    row = next(m for m in json.loads(record.read_text())["metrics"] if m["name"] == "training.throughput_per_gpu")
    assert row["status"] == "RECORD" and row["reason"].startswith("history unreadable: ")
    assert row["reason"].endswith("; baseline not judged")
    assert (run / "report.html").is_file() and db.read_bytes() == before

