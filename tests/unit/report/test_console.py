from __future__ import annotations

import threading
from io import StringIO

from rich.console import Console

from cvs_tasks.report.console import (
    ConsoleListener,
    make_console_listener,
    print_command_failures,
    print_summary,
    progress_line,
)
from cvs_tasks.report.results import build_results
from cvs_tasks.run.events import NodeProgress, StageEvent

COMBO = "MBS=4,GBS=128,PRECISION=FP8"


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def plain_console() -> tuple[Console, StringIO]:
    out = StringIO()
    return Console(file=out, force_terminal=False, width=200), out


def progress(step: int, state: str = "running", rank: int = 0, host: str = "node-a") -> NodeProgress:
    return NodeProgress("training", COMBO, host, rank, state, step=step, total=200, loss=7.25, tflops=410.5,
                        elapsed_s=62.0)


def test_non_terminal_console_gets_plain_mode():
    console, _ = plain_console()
    assert make_console_listener(console).live is False
    assert make_console_listener(console, live=True).live is True


def test_plain_progress_line_has_host_state_step_loss_tflops_elapsed():
    line = progress_line(progress(120))
    assert line == (f"test_training[{COMBO}] node-a (rank 0): running step 120/200 loss 7.25 TFLOP/s 410.5 "
                    "elapsed 1 m 02 s")


def test_plain_mode_throttles_progress_but_not_state_changes():
    console, out = plain_console()
    clock = FakeClock()
    listener = ConsoleListener(console, live=False, interval_s=5.0, clock=clock)
    with listener:
        listener(StageEvent("training", COMBO))
        listener(progress(1))
        clock.now += 1
        listener(progress(2))  # same state within 5 s: dropped
        listener(progress(2, rank=1, host="node-b"))  # another node: printed
        clock.now += 5
        listener(progress(7))  # interval elapsed: printed
        clock.now += 0.5
        listener(progress(8, state="stalled"))  # state change: printed at once
        listener(StageEvent("training", COMBO, status="FAIL", reason="stalled on node-a"))
    lines = out.getvalue().splitlines()
    assert lines[0] == f"test_training[{COMBO}]: started"
    assert [line.split(" step ")[1].split()[0] for line in lines[1:5]] == ["1/200", "2/200", "7/200", "8/200"]
    assert "node-b (rank 1)" in lines[2] and "stalled" in lines[4]
    assert lines[5] == f"test_training[{COMBO}]: FAIL - stalled on node-a"
    assert len(lines) == 6
    assert "\x1b[" not in out.getvalue()


def test_plain_mode_forgets_throttle_state_when_a_stage_ends():
    console, out = plain_console()
    clock = FakeClock()
    listener = ConsoleListener(console, live=False, clock=clock)
    listener(progress(1))
    listener(StageEvent("training", COMBO, status="PASS"))
    listener(progress(1))  # a rerun of the stage prints its first progress again
    assert out.getvalue().count("step 1/200") == 2


def test_unknown_events_are_ignored():
    console, out = plain_console()
    make_console_listener(console)(object())
    assert out.getvalue() == ""


def test_live_mode_draws_a_table_per_stage_and_prints_stage_ends():
    out = StringIO()
    console = Console(file=out, force_terminal=True, width=140)
    with make_console_listener(console) as listener:
        assert listener.live
        listener(StageEvent("training", COMBO))
        listener(progress(3))
        listener(NodeProgress("smoke", None, "node-b", 1, "starting"))
        listener(StageEvent("training", COMBO, status="PASS", reason="200/200"))
    text = out.getvalue()
    assert "node-a" in text and "410.5" in text and "test_smoke" in text
    assert "PASS" in text and "200/200" in text


def test_events_from_many_threads_are_serialised():
    console, out = plain_console()
    listener = ConsoleListener(console, live=False, interval_s=0.0)
    errors: list[BaseException] = []

    def work(rank: int) -> None:
        try:
            for step in range(50):
                listener(progress(step, rank=rank, host=f"node-{rank}"))
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(r,)) for r in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == []
    lines = out.getvalue().splitlines()
    assert len(lines) == 400
    assert all(line.startswith("test_training[") for line in lines)  # no interleaved halves


def test_summary_lists_every_test_with_the_verdict_and_report_path(fixture_run):
    run = fixture_run("failed_nccl")
    (run.path / "report.html").write_text("<html></html>")
    console, out = plain_console()
    print_summary(build_results(run), console, run_dir=run.path)
    text = out.getvalue()
    assert f"test_training[{COMBO}]" in text and "NCCL timeout on mi300-b" in text
    assert "Verdict: FAIL - 2 failed" in text
    assert f"Report: {run.path / 'report.html'}" in text


# -- issue #26 item 6: the cause on the last screen --------------------------------------------------
OOM_LINE = ("[rank7]: torch.OutOfMemoryError: HIP out of memory. Tried to allocate 3.91 GiB. GPU 7 has a total "
            "capacity of 191.98 GiB of which 2.21 GiB is free.")
RUN_ID = "20261206-044803-ea9e"
LONG = "MBS=2,GBS=16,PRECISION=FP8"


def _row(name, status, reason="", **extra):
    return {"name": name, "status": status, "reason": reason, "duration_s": 1.3, "stage": "training",
            "combo": None, "details": {}, "nodes": [], "logs": [], "metrics": [], **extra}


def oom_results() -> dict:
    log = f"logs/training/{LONG.replace('=', '_').replace(',', '_')}/out-node0/training.log"
    error = {"name": "gpu_oom", "cls": "oom", "host": "localhost", "rank": 0, "line": 76, "text": OOM_LINE}
    tests = [_row("test_launch_container", "PASS", "running"),
             _row(f"test_training[{LONG.replace('FP8', 'BF16')}]", "PASS", "20/20 iterations, 526.5 TFLOP/s/GPU"),
             _row(f"test_training[{LONG}]", "FAIL", f"gpu_oom on node localhost (log line 76): {OOM_LINE}",
                  combo=LONG, details={"error": error}, started=5.0,
                  nodes=[{"host": "localhost", "rank": 0, "status": "FAIL", "log": log, "last_step": 2}]),
             _row(f"test_metric[{LONG}]", "SKIPPED", f"skipped: test_training[{LONG}] failed", stage="metric"),
             _row("test_teardown", "PASS", "torn down")]
    return {"run_id": RUN_ID, "verdict": "FAIL", "verdict_reason": "1 failed", "tests": tests}


def console_at(width: int) -> tuple[Console, StringIO]:
    out = StringIO()
    return Console(file=out, force_terminal=False, width=width), out  # a plain rich Console: markup on


def test_at_80_columns_no_test_name_or_run_id_is_cut(tmp_path):
    console, out = console_at(80)
    print_summary(oom_results(), console, run_dir=tmp_path / RUN_ID)
    lines = out.getvalue().splitlines()
    for test in oom_results()["tests"]:
        assert any(test["name"] in line for line in lines), test["name"]  # whole, on one line
    assert any(RUN_ID in line for line in lines[:1])
    assert not any(line.startswith(("┃", "│", "┏")) for line in lines)  # a list, not a folded table


def test_a_wide_console_keeps_the_table():
    console, out = console_at(200)
    print_summary(oom_results(), console)
    text = out.getvalue()
    assert "┃ Test" in text and f"test_training[{LONG}]" in text


def test_the_last_lines_name_test_node_rank_cause_log_line_and_report(tmp_path):
    run_dir = tmp_path / RUN_ID
    run_dir.mkdir()
    (run_dir / "report.html").write_text("<html></html>")
    console, out = console_at(80)
    print_summary(oom_results(), console, run_dir=run_dir)
    lines = out.getvalue().splitlines()
    assert lines[-3] == "Verdict: FAIL - 1 failed"
    failure = lines[-2]
    assert failure.startswith(f"FAIL test_training[{LONG}] on node localhost, rank 7: gpu_oom (oom) at ")
    assert f"{run_dir}/logs/training/MBS_2_GBS_16_PRECISION_FP8/out-node0/training.log:76: [rank7]: " in failure
    assert "torch.OutOfMemoryError: HIP out of memory" in failure
    assert lines[-1] == f"Report: {run_dir / 'report.html'}"


def test_a_stage_command_ends_with_its_own_failures_only(tmp_path):
    results = oom_results()
    results["tests"].insert(0, _row("test_smoke", "FAIL", "an earlier command's failure", stage="smoke"))
    results["tests"].append(_row("test_loss", "NOT-RUN", "not asked", stage="loss"))
    console, out = console_at(80)
    print_command_failures(results, {f"test_training[{LONG}]"}, console, run_dir=tmp_path)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"FAIL test_training[{LONG}] on node localhost, rank 7: gpu_oom (oom) at ")
    assert f"{tmp_path}/logs/training/" in lines[0] and ":76: [rank7]: " in lines[0]
    console, out = console_at(80)
    print_command_failures(results, {"test_teardown"}, console)
    assert out.getvalue() == ""  # a command whose tests passed adds nothing


def test_node_text_is_printed_as_typed_never_as_markup():
    results = oom_results()
    results["tests"][2]["reason"] = "[rank7]: [bold]boom[/bold] [/oops]"
    console, out = console_at(80)
    print_summary(results, console)
    text = out.getvalue()
    assert "[rank7]: [bold]boom[/bold] [/oops]" in text and "[rank7]: torch.OutOfMemoryError" in text


def test_a_threshold_failure_line_names_the_metric_with_unit_and_bound():
    results = oom_results()
    node = {"host": "n1", "rank": 1, "status": "PASS", "log": "logs/training/X/out-node1/training.log",
            "last_step": 20}
    results["tests"] = [_row("test_training[X]", "PASS", combo="X", nodes=[node]),
                        _row("test_metric[X]", "FAIL", "training.throughput_per_gpu: 396.2 is below the minimum 420",
                             stage="metric", combo="X",
                             metrics=[{"name": "training.throughput_per_gpu", "value": 396.2, "unit": "TFLOP/s/GPU",
                                       "expected": ">= 420", "status": "FAIL"}])]
    console, out = console_at(80)
    print_summary(results, console)
    assert out.getvalue().splitlines()[-1] == (
        "FAIL test_metric[X] on node n1 (node 1 of the cluster): throughput_per_gpu 396.2 TFLOP/s/GPU, "
        "bound >= 420 TFLOP/s/GPU; log logs/training/X/out-node1/training.log")


def test_an_interrupted_test_says_so_with_the_real_run_id():
    results = oom_results()
    results["tests"][2] = _row(f"test_training[{LONG}]", "ERROR", "interrupted by the user",
                               details={"interrupted": True})
    console, out = console_at(80)
    print_summary(results, console)
    last = out.getvalue().splitlines()[-1]
    assert last.startswith(f"INTERRUPTED test_training[{LONG}]: interrupted by the user - ")
    assert f"`invoke all --run {RUN_ID}`" in last and "infrastructure" not in last


def test_a_passing_run_ends_with_the_verdict_and_report_only(tmp_path):
    results = oom_results()
    results.update(verdict="PASS", verdict_reason="all 2 tests passed")
    results["tests"] = results["tests"][:2]
    console, out = console_at(80)
    print_summary(results, console, run_dir=tmp_path)
    assert out.getvalue().splitlines()[-2:] == ["Verdict: PASS - all 2 tests passed", f"Run directory: {tmp_path}"]


# -- issue #25 item 6: the console at 1,024 nodes ----------------------------------------------------
NODES = 1024


def fleet(step: int, state: str = "running", rank: int = 0) -> NodeProgress:
    return NodeProgress("training", COMBO, f"gpu-{rank:04d}", rank, state, step=step, total=200, loss=7.0,
                        tflops=410.0 + rank % 7, elapsed_s=60.0)


def test_plain_output_at_1024_nodes_is_a_summary_per_interval_plus_failed_nodes():
    console, out = plain_console()
    clock = FakeClock()
    listener = ConsoleListener(console, live=False, interval_s=5.0, clock=clock)
    listener(StageEvent("training", COMBO))
    for round_ in range(4):  # four polls: every node reports each time
        for rank in range(NODES):
            listener(fleet(10 * round_ + (3 if rank == 517 else 10), rank=rank))
        clock.now += 2.5
    listener(fleet(31, "failed", rank=700))
    listener(fleet(31, "stalled", rank=3))
    clock.now += 5
    listener(fleet(40, rank=1))
    listener(StageEvent("training", COMBO, status="FAIL", reason="gpu_oom on node gpu-0700"))
    lines = out.getvalue().splitlines()
    assert len(lines) < 40, len(lines)  # not 4,096 progress lines
    summaries = [line for line in lines if ": 1024 nodes: " in line]
    assert len(summaries) >= 2
    final = summaries[-1]
    assert "1021 running, 1 failed, 1 stalled" in final or "1022 running, 1 failed, 1 stalled" in final
    assert "failed or stalled: gpu-0003 (stalled), gpu-0700 (failed)" in final  # trouble first, by rank
    assert "slowest: gpu-0517 (rank 517) step 33" in final
    assert "step 31 / 40 / 40 (min / median / max) of 200" in final or "(min / median / max) of 200" in final
    assert any(line.startswith(f"test_training[{COMBO}] gpu-0700 (rank 700): failed") for line in lines)
    assert lines[-1] == f"test_training[{COMBO}]: FAIL - gpu_oom on node gpu-0700"


def test_plain_output_names_only_the_first_few_failures_when_a_whole_job_fails():
    console, out = plain_console()
    listener = ConsoleListener(console, live=False, interval_s=5.0, clock=FakeClock())
    listener(StageEvent("training", COMBO))
    for rank in range(NODES):
        listener(fleet(10, rank=rank))
    for rank in range(NODES):
        listener(fleet(10, "stalled", rank=rank))
    lines = out.getvalue().splitlines()
    assert sum(" stalled" in line and "(rank " in line for line in lines) <= 8 + 16
    assert "further failed or stalled nodes are counted in the summary lines" in out.getvalue()


def test_live_view_at_1024_nodes_draws_a_summary_not_a_row_per_node():
    from cvs_tasks.report.console import stage_view

    nodes = {(f"gpu-{r:04d}", r): fleet(10 if r != 9 else 4, "failed" if r == 600 else "running", rank=r)
             for r in range(NODES)}
    out = StringIO()
    Console(file=out, width=80, force_terminal=False).print(stage_view(("training", COMBO), nodes, 80))
    text = out.getvalue().splitlines()
    assert len(text) <= 12, text
    assert text[:2] == [f"test_training[{COMBO}]", "  1024 nodes: 1023 running, 1 failed"]
    assert "  failed  gpu-0600 (rank 600)" in "\n".join(text)
    assert "  slowest gpu-0009 (rank 9) step 4" in "\n".join(text)


def test_live_view_of_a_few_nodes_keeps_a_row_per_node_and_lists_them_when_narrow():
    from cvs_tasks.report.console import stage_view

    nodes = {(f"node-{r}", r): progress(5, rank=r, host=f"node-{r}") for r in range(3)}
    wide, narrow = StringIO(), StringIO()
    Console(file=wide, width=120).print(stage_view(("training", COMBO), nodes, 120))
    Console(file=narrow, width=60).print(stage_view(("training", COMBO), nodes, 60))
    assert "┃ Host" in wide.getvalue() and wide.getvalue().count("node-") == 3
    assert "┃" not in narrow.getvalue()
    assert narrow.getvalue().count(f"test_training[{COMBO}] node-") == 3


def test_live_mode_at_1024_nodes_redraws_on_a_clock():
    out = StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    clock = FakeClock()
    listener = ConsoleListener(console, live=True, clock=clock)
    redraws = []
    with listener:
        original = listener._renderable
        listener._renderable = lambda: redraws.append(1) or original()
        listener(StageEvent("training", COMBO))
        for rank in range(NODES):
            listener(fleet(10, rank=rank))
        clock.now += 1.0
        listener(fleet(11, rank=5))
        listener(StageEvent("training", COMBO, status="PASS", reason="200/200"))
    assert len(redraws) < 40, len(redraws)  # not one per event
