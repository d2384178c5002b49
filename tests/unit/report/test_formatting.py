from __future__ import annotations

import math

from cvs_tasks.report.formatting import (
    DASH,
    fmt_duration,
    fmt_number,
    fmt_test_duration,
    fmt_time,
    or_dash,
    plain_text,
    short_metric,
)


def test_numbers():
    assert fmt_number(None) == DASH
    assert fmt_number(412.0) == "412"
    assert fmt_number(6647.93) == "6,647.9"
    assert fmt_number(412.0423) == "412.0423"
    assert fmt_number(0.05) == "0.05"
    assert fmt_number(-0.000123) == "-0.000123"
    assert fmt_number(math.nan) == "nan"
    assert fmt_number(True) == "True"


def test_durations_and_times():
    assert fmt_duration(None) == DASH
    assert fmt_duration(12.34) == "12.3 s"
    assert fmt_duration(245) == "4 m 05 s"
    assert fmt_duration(3725) == "1 h 02 m"
    assert fmt_test_duration("SKIPPED", 0.01) == DASH
    assert fmt_test_duration("PASS", 0.01) == "0.0 s"
    assert fmt_time(1780000000.0) == "2026-05-28 20:26:40 UTC"
    assert fmt_time("yesterday") == DASH


def test_manifest_values():
    assert or_dash(None) == DASH and or_dash("") == DASH and or_dash([]) == DASH
    assert or_dash(["a", "b"]) == "a, b"
    assert or_dash(True) == "yes"
    assert or_dash(8) == "8"


def test_metric_names_and_log_text():
    assert short_metric("training.mem_usage") == "mem_usage"
    assert short_metric("convergence") == "convergence"
    assert plain_text("\x1b[31mred\x1b[0m a\x00b\tc") == "red ab\tc"
