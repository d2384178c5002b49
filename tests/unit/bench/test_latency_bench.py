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
