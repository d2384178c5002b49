"""The lifecycle end to end on this machine: the real invoke CLI, the `host` runtime, the simulated
trainer run from the repo. No Docker or SSH needed, so these run everywhere."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.conftest import REPO, edited_config, impossible_gate, run_invoke

DEMO = REPO / "configs" / "testbed" / "demo_host.json"
LOCAL = REPO / "cluster" / "localhost.json"
FLAGS = ["--config", str(DEMO), "--cluster", str(LOCAL)]


def combos() -> list[str]:
    return json.loads(DEMO.read_text())["sweep"]["runs"]


def faulty_and_healthy() -> tuple[str, str]:
    """The combo to break (not sharing the smoke cell's precision, so smoke stays healthy) and another."""
    smoke_precision = json.loads(DEMO.read_text())["smoke"]["precision"]
    faulty = next(c for c in combos() if not c.endswith(f"PRECISION={smoke_precision}"))
    return faulty, next(c for c in combos() if c != faulty)


def with_env(tmp_path: Path, stall_timeout_s: float | None = None, **env: str) -> list[str]:
    def edit(cfg):
        cfg["container"]["env"].update(env)
        if stall_timeout_s is not None:
            cfg.setdefault("watch", {})["stall_timeout_s"] = stall_timeout_s

    return ["--config", str(edited_config(DEMO, tmp_path, edit)), "--cluster", str(LOCAL)]


def test_demo_passes_and_writes_every_report_file(reports):
    res = run_invoke("demo", reports=reports)
    assert res.code == 0, res.out + res.err
    results = res.results()
    assert results["verdict"] == "PASS"
    names = [t["name"] for t in results["tests"]]
    for combo in combos():
        assert f"test_training[{combo}]" in names and f"test_metric[{combo}]" in names
    for name in ("report.html", "metrics.html", "junit.xml", "results.json", "run.json"):
        assert (res.run_dir / name).is_file(), name
    training = res.record("training", combos()[0])
    assert training["data"]["metrics"]["training.throughput_per_gpu"] > 0
    assert (res.run_dir / training["nodes"][0]["log"]).is_file()
    rows = {m["name"]: m for m in res.test(f"test_metric[{combos()[0]}]")["metrics"]}
    final = rows["training.final_loss"]  # convergence: the final loss against target_value 5.0
    assert final["status"] == "PASS" and final["value"] <= 5.0 and final["expected"] == "<= 5"
    assert rows["training.steps_to_target"]["value"] <= 20
    names = list(rows)  # the reference's aggregation right after ours, recorded only
    ours = names.index("training.throughput_per_gpu")
    assert names[ours + 1] == "training.throughput_per_gpu (ROCm CVS)"
    assert rows["training.throughput_per_gpu (ROCm CVS)"]["status"] == "RECORD"
    html = (res.run_dir / "report.html").read_text()
    assert "final_loss" in html and "throughput_per_gpu (ROCm CVS)" in html


def test_ad_hoc_chain_reuses_the_run_and_skips_what_is_done(reports):
    first, second = combos()[:2]
    res = run_invoke("train", "--combo", first, *FLAGS, reports=reports)
    assert res.code == 0, res.out + res.err
    run = res.run_dir
    assert (run / "stages" / "launch_container.json").is_file()  # the pre-task ran
    trained = res.record("training", first)

    res2 = run_invoke("metric", "--combo", first, "loss", "--combo", first, reports=reports)
    assert res2.code == 0, res2.out + res2.err
    assert res2.run_dir == run  # same run, found as the latest
    assert res2.record("training", first)["started"] == trained["started"]  # not retrained
    assert res2.record("metric", first)["status"] == "PASS"
    assert res2.record("loss_curve", first)["status"] == "PASS"
    assert not (run / "stages" / f"training[{second.replace('=', '_').replace(',', '_')}].json").exists()

    report = run_invoke("report", reports=reports)  # judged on what was asked: the other combo was not
    assert report.code == 0, report.out + report.err
    assert report.results()["verdict"] == "PASS" and report.results()["incomplete"] is False
    assert report.test(f"test_metric[{first}]")["status"] == "PASS"
    assert report.test(f"test_training[{second}]")["reason"].startswith("not asked: ")

    res3 = run_invoke("teardown", reports=reports)
    assert res3.code == 0, res3.out + res3.err
    assert res3.record("teardown")["status"] == "PASS"


def test_a_fault_fails_only_its_combo_with_the_signature(reports, tmp_path):
    faulty, healthy = faulty_and_healthy()
    precision = faulty.split("PRECISION=")[1]
    flags = with_env(tmp_path, SIM_FAULT="oom@3", SIM_FAULT_PRECISION=precision)
    res = run_invoke("all", *flags, reports=reports)
    assert res.code == 1, res.out + res.err
    bad = res.record("training", faulty)
    assert bad["status"] == "FAIL"
    assert bad["data"]["error"]["cls"] == "oom"
    assert "out of memory" in bad["reason"].lower() or "oom" in bad["reason"].lower()
    assert res.record("metric", faulty)["status"] == "SKIPPED"
    assert res.record("loss_curve", faulty)["status"] == "SKIPPED"
    assert res.record("training", healthy)["status"] == "PASS"
    assert res.record("teardown")["status"] == "PASS"
    assert res.results()["verdict"] == "FAIL"


def test_a_final_loss_above_the_target_fails_the_metric_stage(reports, tmp_path):
    cfg = edited_config(DEMO, tmp_path, lambda c: c["convergence"].update(target_value=1.0))
    res = run_invoke("all", "--config", str(cfg), "--cluster", str(LOCAL), reports=reports)
    assert res.code == 1, res.out + res.err
    metric = res.record("metric", combos()[0])
    assert metric["status"] == "FAIL" and "training.final_loss: final training loss" in metric["reason"]
    assert "is above the target 1; never reached" in metric["reason"]


def test_the_demo_as_annotated_toml_runs_the_same(reports, tmp_path):
    from cvs_tasks.config.templates import annotated_toml

    cfg = json.loads(edited_config(DEMO, tmp_path, lambda c: None).read_text())
    toml_config = tmp_path / "demo_host.toml"
    toml_config.write_text(annotated_toml(cfg, "config"))
    toml_cluster = tmp_path / "localhost.toml"
    toml_cluster.write_text(annotated_toml(json.loads(LOCAL.read_text()), "cluster"))
    res = run_invoke("all", "--config", str(toml_config), "--cluster", str(toml_cluster), reports=reports)
    assert res.code == 0, res.out + res.err
    assert json.loads((res.run_dir / "run.json").read_text())["combos"] == combos()


def test_a_gate_set_too_high_fails_with_the_metric_named(reports, tmp_path):
    edit = impossible_gate(tmp_path, "training.throughput_per_gpu", {"kind": "min", "value": 1e9})
    cfg = edited_config(DEMO, tmp_path, edit)
    res = run_invoke("all", "--config", str(cfg), "--cluster", str(LOCAL), reports=reports)
    assert res.code == 1, res.out + res.err
    metric = res.record("metric", combos()[0])
    assert metric["status"] == "FAIL"
    assert "training.throughput_per_gpu" in metric["reason"]


def test_an_early_failure_skips_every_later_stage(reports, tmp_path):
    def edit(cfg):
        cfg["smoke"]["enabled"] = True
        cfg["container"]["env"].update(SIM_FAULT="crash@2")

    cfg = edited_config(DEMO, tmp_path, edit)
    res = run_invoke("all", "--config", str(cfg), "--cluster", str(LOCAL), reports=reports)
    assert res.code == 1, res.out + res.err
    assert res.record("smoke")["status"] == "FAIL"
    for combo in combos():
        rec = res.record("training", combo)
        assert rec["status"] == "SKIPPED" and "test_smoke" in rec["reason"]
    assert res.record("teardown")["status"] == "PASS"


def test_bad_config_is_exit_2_with_the_field_named(reports, tmp_path):
    def edit(cfg):
        cfg["gpu_name"] = "H100"

    cfg = edited_config(DEMO, tmp_path, edit)
    res = run_invoke("all", "--config", str(cfg), "--cluster", str(LOCAL), reports=reports)
    assert res.code == 2
    assert "gpu_name" in res.err and "Traceback" not in res.err


def test_a_config_edited_between_two_commands_of_one_run_is_refused(reports, tmp_path):
    cfg = edited_config(DEMO, tmp_path, lambda c: None)
    flags = ["--config", str(cfg), "--cluster", str(LOCAL)]
    first = combos()[0]
    res = run_invoke("train", "--combo", first, *flags, reports=reports)
    assert res.code == 0, res.out + res.err
    data = json.loads(cfg.read_text())
    data["loss_curve"]["max_slope"] = -0.5
    cfg.write_text(json.dumps(data))
    res2 = run_invoke("metric", "--combo", first, *flags, reports=reports)
    assert res2.code == 2
    assert "changed since run" in res2.err
    down = run_invoke("teardown", "--run", str(res.run_dir), reports=reports)  # releasing nodes still works
    assert down.code == 0, down.out + down.err


def test_sigint_stops_tears_down_records_and_a_resume_finishes(reports, tmp_path):
    flags = with_env(tmp_path, SIM_TIME_SCALE="0.25")  # 0.4 s per step: time to interrupt mid-combo
    first = combos()[0]
    env = dict(__import__("os").environ, CVS_REPORTS_DIR=str(reports))
    proc = subprocess.Popen([sys.executable, "-m", "invoke", "all", *flags], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        from cvs_tasks.run import combo_dir

        log = reports / "latest" / "logs" / "training" / combo_dir(first) / "out-node0" / "training.log"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (log.exists()
                                                   and "iteration        3/" in log.read_text(errors="replace")):
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    run = (reports / "latest").resolve()
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["interrupted"] is True
    assert json.loads((run / "stages" / "teardown.json").read_text())["status"] == "PASS"
    assert (run / "report.html").is_file()
    stopped = json.loads((run / "stages" / f"training[{combo_dir(first)}].json").read_text())
    assert stopped["data"].get("interrupted") is True
    assert not (run / "stages" / f"training[{combo_dir(combos()[1])}].json").exists()

    resumed = run_invoke("all", "--run", run.name, *flags, reports=reports)
    assert resumed.code == 0, resumed.out + resumed.err
    assert resumed.run_dir == run
    assert resumed.record("training", first)["status"] == "PASS"
    assert resumed.results()["verdict"] == "PASS"
    smoke = json.loads((run / "stages" / "smoke.json").read_text())
    assert smoke["started"] < stopped["started"]  # recorded stages were kept, not rerun
