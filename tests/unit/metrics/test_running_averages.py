"""Printed running averages are not step times: Primus' cumulative average on its first steps is
recognised from the lines' time stamps and kept out of the steady metrics (issue #27, round 3).

``primus_smoke_cumulative.log`` (make_fixtures.py): 10 steps, step 1 takes 30 498 ms, the others
750 + 2*(step % 3) ms; steps 2 and 3 print the average since step 1 (15 626.0, 10 668.7 ms).
"""

import statistics
from datetime import datetime, timedelta

import pytest
from invoke import Program

from cvs_tasks.metrics import LogParser, parse_file
from cvs_tasks.tasks.logs import ns


def real_ms(step):
    return 30498.0 if step == 1 else 750.0 + 2 * (step % 3)


def test_the_primus_smoke_reports_the_real_step_time_not_the_cumulative_average(fixture_log):
    parser = parse_file(fixture_log("primus_smoke_cumulative.log"))
    metrics, used = parser.metrics(), parser.stats.describe()
    steady = [real_ms(s) for s in range(4, 11)]
    assert used["averaged_steps"] == [2, 3] and used["warmup_cutoff"] == 3 and parser.warmup_cutoff == 3
    assert (used["basis"], used["first_step"], used["last_step"]) == ("steady", 4, 10)
    assert metrics["training.elapsed_time_per_iteration"] == pytest.approx(statistics.mean(steady))
    assert metrics["training.throughput_per_gpu"] == pytest.approx(310.0 * 750.0 / 752.0, rel=0.01)
    # what the 10 % rule alone kept (steps 2..10 as printed) is over 4x the real step time
    printed = [it.elapsed_ms for step, it in parser.iterations.items() if step >= 2]
    assert statistics.mean(printed) > 4 * metrics["training.elapsed_time_per_iteration"]


def test_logs_parse_says_which_steps_it_used(fixture_log, capsys):
    Program(namespace=ns).run(["inv", "parse", str(fixture_log("primus_smoke_cumulative.log"))], exit=False)
    out = capsys.readouterr().out
    assert "warm-up steps <= 3; metrics from steps 4-10 (7, steady)" in out
    assert "steps 2, 3 printed a running average" in out


def line(step, total, printed, stamp=None, header=None):
    """A Megatron iteration line with an optional ``[stamp]`` and a Primus loguru ``header``."""
    text = (f"iteration {step:8d}/{total:8d} | consumed samples: {step * 16:12d} | elapsed time per iteration "
            f"(ms): {printed} | learning rate: 1.0E-05 | global batch size:    16 | lm loss: 9.0E+00 | "
            "loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |")
    if stamp is not None:
        text = f" [{stamp}] " + text
    return (header or "") + text + "\n"


def stamps(times_ms, start="2026-11-30 04:00:00", micro=True):
    t0, out, total = datetime.fromisoformat(start), [], 0.0
    for ms in times_ms:
        total += ms
        out.append((t0 + timedelta(milliseconds=total)).strftime("%Y-%m-%d %H:%M:%S" + (".%f" if micro else "")))
    return out


def parse(text):
    parser = LogParser()
    parser.feed(text)
    parser.finish()
    return parser


def test_a_printed_pair_uses_this_steps_time_even_when_the_average_is_cumulative():
    times = [30498.0] + [750.3] * 9
    text = "".join(line(s, 10, f"{real:.1f}" if s == 1 else f"{real:.1f}/{sum(times[:s]) / s:.1f}", st)
                   for s, real, st in zip(range(1, 11), times, stamps(times)))
    parser = parse(text)
    assert parser.stats.describe()["averaged_steps"] == []
    assert parser.metrics()["training.elapsed_time_per_iteration"] == pytest.approx(750.3)


def test_second_resolution_stamps_of_the_loguru_header_are_enough():
    times = [30498.0] + [750.0] * 9
    printed = [sum(times[:s]) / s if s <= 3 else times[s - 1] for s in range(1, 11)]
    t0 = datetime(2025, 12, 2, 9, 0, 0)
    text, total = "", 0.0
    for s in range(1, 11):
        total += times[s - 1]
        clock = (t0 + timedelta(milliseconds=total)).strftime("%Y%m%d %H:%M:%S")
        text += line(s, 10, f"{printed[s - 1]:.1f}", header=f"[{clock}][rank-7/8][INFO ] [--------trainer.py:2560] : ")
    parser = parse(text)
    assert parser.stats.describe()["averaged_steps"] == [2, 3]
    assert parser.metrics()["training.elapsed_time_per_iteration"] == pytest.approx(750.0)


def test_slow_steps_that_the_clock_confirms_stay_in_the_steady_metrics():
    times = [30000.0, 800.0, 800.0, 9000.0, 800.0, 800.0, 800.0, 800.0, 800.0, 800.0]  # step 4 really slow
    text = "".join(line(s, 10, f"{t:.1f}", st, PRIMUS) for s, t, st in zip(range(1, 11), times, stamps(times)))
    parser = parse(text)
    assert parser.stats.describe()["averaged_steps"] == []
    assert parser.metrics()["training.elapsed_time_per_iteration"] == pytest.approx(statistics.mean(times[1:]))


@pytest.mark.parametrize("clock", ["backwards", "none", "frozen_seconds"])
def test_stamps_that_cannot_tell_flag_nothing(clock):
    times = [30000.0] + [800.0] * 9
    if clock == "backwards":
        marks = list(reversed(stamps(times)))
    elif clock == "none":
        marks = [None] * 10
    else:  # every line in the same second: 1 s resolution allows 1.5 s per step
        marks = ["2026-11-30 04:00:00"] * 10
    text = "".join(line(s, 10, f"{t:.1f}", st) for s, t, st in zip(range(1, 11), times, marks))
    assert parse(text).stats.describe()["averaged_steps"] == []


def test_a_log_interval_above_one_compares_with_the_steps_between_lines():
    steps = [10, 20, 30, 40, 50]
    times = [3000.0, 800.0, 800.0, 800.0, 800.0]  # per-step average over each interval of 10
    marks = stamps([t * 10 for t in times])
    text = "".join(line(s, 50, f"{t:.1f}", st, PRIMUS) for s, t, st in zip(steps, times, marks))
    assert parse(text).stats.describe()["averaged_steps"] == []


PRIMUS = "[20261130 04:00:00][rank-7/8][DEBUG] [---------utils.py:425] : "  # the record's own stamp unused here


def test_a_restarted_attempt_is_probed_again():
    first = [30000.0] + [800.0] * 29
    again = [30000.0, 15400.0, 800.0, 800.0, 800.0, 800.0, 800.0, 800.0, 800.0, 800.0]  # step 2 of the retry averaged
    real_again = [30000.0] + [800.0] * 9
    text = "".join(line(s, 100, f"{t:.1f}", st, PRIMUS) for s, t, st in zip(range(1, 31), first, stamps(first)))
    text += "".join(line(s, 100, f"{t:.1f}", st, PRIMUS) for s, t, st in
                    zip(range(1, 11), again, stamps(real_again, start="2026-11-30 05:00:00")))
    parser = parse(text)
    used = parser.stats.describe()
    assert used["restarts"] == 1 and used["averaged_steps"] == [2]
    # the retry never left its warm-up (10 % of 100): the steps after its first, step 2 left out
    assert (used["basis"], used["count"]) == ("after_first_step", 8)
    assert parser.metrics()["training.elapsed_time_per_iteration"] == pytest.approx(800.0)


def test_the_readme_states_the_warm_up_rule_the_code_applies():
    from pathlib import Path

    from cvs_tasks.metrics import warmup_cutoff
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    assert "`max(1, int(10 % of the steps it runs))`" in readme
    assert "resumed at step 14001 of 15550 drops 14001-14155" in readme
    assert warmup_cutoff(15550, None, 14001) == 14155
    assert warmup_cutoff(50, None) == 5 and warmup_cutoff(10, None) == 1 and warmup_cutoff(None, 7, 5) == 5
    times = [2000.0] + [800.0] * 1549
    text = "".join(line(s, 15550, f"{t:.1f}") for s, t in zip(range(14001, 15551), times))
    assert parse(text).warmup_cutoff == 14155


def test_megatron_lines_are_never_probed_only_primus_records_print_cumulative_averages():
    """Megatron-LM prints the average over the log interval. A log whose stamps run slower than
    its printed times (a time-compressed stand-in, a clock stepped back) keeps every step; the
    same lines as Primus records are probed."""
    times = [1600.0] * 20
    compressed = stamps([t * 0.03 for t in times])  # stamps 48 ms apart, steps printed as 1600 ms
    megatron = "".join(line(s, 20, f"{t:.1f}", st) for s, t, st in zip(range(1, 21), times, compressed))
    assert parse(megatron).stats.describe()["averaged_steps"] == []
    assert parse(megatron).metrics()["training.elapsed_time_per_iteration"] == pytest.approx(1600.0)
    primus = "".join(line(s, 20, f"{t:.1f}", st, PRIMUS) for s, t, st in zip(range(1, 21), times, compressed))
    assert parse(primus).stats.describe()["averaged_steps"] == list(range(2, 18))
