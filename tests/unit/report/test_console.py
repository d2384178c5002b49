from __future__ import annotations

import threading
from io import StringIO

from rich.console import Console

from cvs_tasks.report.console import ConsoleListener, make_console_listener, print_summary, progress_line
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
