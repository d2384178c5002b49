import threading
import time
from pathlib import Path

from benchmarks.latency import LogObserver, edited_config, simulated_seconds
from cvs_tasks.config import load_cluster, load_suite

REPO = Path(__file__).resolve().parents[3]


def test_simulated_time_is_startup_plus_scaled_steps_with_warm_up():
    env = {"SIM_STEP_MS": "1600", "SIM_TIME_SCALE": "0.1", "SIM_STARTUP_S": "0.5"}
    got = simulated_seconds(env, 20)
    plain = 0.5 + 20 * 1600 * 0.1 / 1000  # the brief's formula, without the warm-up of steps 1-2
    warm = 0.5 + (20 + 2.0 + 0.15) * 0.16
    assert plain < got
    assert abs(got - warm) < 0.02 * warm  # +-1.5 % jitter per step


def test_edited_config_loads_with_its_own_name_logs_and_env(tmp_path):
    src = REPO / "configs" / "testbed" / "demo_host.json"
    path = edited_config(src, tmp_path, name="cvs_bench_x", log_root=tmp_path / "run",
                         env={"SIM_FAULT": "oom@3"})
    suite = load_suite(path, load_cluster(REPO / "cluster" / "localhost.json"))
    cfg = suite.config
    assert cfg.container.name == "cvs_bench_x"
    assert cfg.paths.log_dir == str(tmp_path / "run" / "logs")
    assert cfg.container.env["SIM_FAULT"] == "oom@3"
    assert suite.threshold_path is not None and suite.threshold_path.is_file()


def test_observer_stamps_the_last_iteration_and_the_first_fatal_line(tmp_path):
    log = tmp_path / "node0.log"
    log.write_text("")
    obs = LogObserver()
    obs.start([str(log)])
    line = (" [2026-03-06 08:00:00] iteration {s:8d}/{t:8d} | consumed samples: 128 | elapsed time per "
            "iteration (ms): 1600.0 | throughput per GPU (TFLOP/s/GPU): 400.0 | learning rate: 1.0E-04 | "
            "global batch size:   128 | lm loss: 2.000000E+00 | loss scale: 1.0 | grad norm: 1.000 | "
            "number of skipped iterations:   0 | number of nan iterations:   0 |\n")
    try:
        with open(log, "a") as fh:
            fh.write(line.format(s=1, t=2))
            fh.flush()
            wrote_last = time.time()
            fh.write(line.format(s=2, t=2))
            fh.flush()
        deadline = time.monotonic() + 10
        while obs.completed_at is None and time.monotonic() < deadline:
            threading.Event().wait(0.01)
        assert obs.completed_at is not None and obs.completed_at >= wrote_last - 0.001
        with open(log, "a") as fh:
            fh.write("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 3.91 GiB.\n")
        while obs.fatal_at is None and time.monotonic() < deadline:
            threading.Event().wait(0.01)
        assert obs.fatal_at is not None and obs.fatal_name
    finally:
        obs.stop()


def test_only_a_bare_sigkill_counts_as_killed_from_outside():
    from benchmarks.latency import killed_from_outside

    reason = "job exited with status 137 on node localhost before completing (step 3/20)"
    assert killed_from_outside("FAIL", reason, {})
    assert not killed_from_outside("FAIL", reason, {"error": {"name": "gpu_oom"}})
    assert not killed_from_outside("FAIL", "job exited with status 1 on node x", {})
    assert not killed_from_outside("PASS", "20/20 iterations", {})


def test_busy_time_counts_overlapping_commands_once_and_only_inside_the_window():
    from benchmarks.latency import busy_within

    spans = [(9.0, 10.5), (10.2, 11.0), (12.0, 12.5), (20.0, 21.0)]
    assert busy_within(spans, 10.0, 13.0) == 1.5  # 10.0-11.0 (two overlapping commands) + 12.0-12.5
    assert busy_within(spans, None, 13.0) == 0.0
    assert busy_within([], 0.0, 5.0) == 0.0


def _timing(combo="c", status="PASS", line=1.1, fatal=None, duration=12.0, commands=0.4, poll=0.5):
    from benchmarks.latency import ComboTiming

    return ComboTiming(combo, status, "20/20 iterations" if status == "PASS" else "oom", duration, 10.0, line, fatal,
                       "gpu_oom" if fatal else "", poll_s=poll, commands_after_line_s=commands,
                       commands_after_fatal_s=commands, commands_in_stage_s=3 * commands)


def test_each_latency_is_reported_and_judged_against_two_periods_plus_its_node_commands():
    from benchmarks.latency import Setup, rows_for

    setup = Setup("testbed-2", Path("c.json"), Path("k.json"), 2)
    rows = {r["name"]: r for r in rows_for(setup, {"complete": [_timing(line=1.1), _timing("d", line=0.6)],
                                                   "fault": [_timing(status="FAIL", line=None, fatal=2.5,
                                                                     commands=1.3)]})}
    line = rows["latency.last_line_to_end_vs_bound[testbed-2]"]
    assert line["value"] == round(1.1 / (2 * 0.5 + 0.4), 3) and line["status"] == "PASS"
    assert rows["latency.last_line_to_end[testbed-2]"]["target"] == "reported"
    fatal = rows["latency.fatal_to_end_vs_bound[testbed-2]"]
    assert fatal["value"] == round(2.5 / 2.3, 3) and fatal["status"] == "PASS"  # 2.5 s on a loaded machine passes
    overhead = rows["latency.overhead_per_combo_vs_bound[testbed-2]"]
    assert overhead["value"] == round(2.0 / (1.0 + 1.2), 3) and overhead["target"] == "<= 2.5"


def test_a_stage_that_waits_beyond_its_periods_and_commands_misses():
    from benchmarks.latency import Setup, rows_for

    setup = Setup("host-1", Path("c.json"), Path("k.json"), 1)
    rows = {r["name"]: r for r in rows_for(setup, {"complete": [_timing(line=2.5, commands=0.05)],
                                                   "fault": [_timing(status="PASS", line=None, fatal=0.5)]})}
    assert rows["latency.last_line_to_end_vs_bound[host-1]"]["status"] == "MISS"  # 2.5 s of 1.05 s
    assert rows["latency.fatal_to_end_vs_bound[host-1]"]["status"] == "MISS"  # the stage did not FAIL
    assert "did not FAIL" in rows["latency.fatal_to_end[host-1]"]["detail"]
