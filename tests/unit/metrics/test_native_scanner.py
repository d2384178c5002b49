"""The C scanner gives exactly the pure-Python result, on every fixture and on generated lines.

The scanner accepts a line only when it is sure of the Python values and hands everything else
back; these tests compare whole parser states (summary, every iteration, errors, skipped lines)
of both paths on the fixture logs, on long thinned logs, and on lines that hypothesis builds
from every segment variant of log_formats.md plus odd spellings (nan, inf, 1_0, hex, month 13,
ANSI colours inside the label, ...).
"""

import math
import random
import struct
from array import array
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cvs_tasks.metrics.parser as parser_module
from cvs_tasks.metrics import LogParser, native, parse_file, retention

from test_retention import long_log

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"

LOGS = sorted(p.name for p in FIXTURES.glob("*.log"))
pytestmark = pytest.mark.skipif(not native.AVAILABLE, reason="the native scanner is not built "
                                "(the parametrized metrics tests fail loudly for that)")


@pytest.fixture(autouse=True)
def parser_path():
    """Overrides the two-path fixture: these tests choose the path themselves."""
    return None


def snapshot(parser: LogParser) -> tuple:
    return (parser.summary(), list(parser.iterations.values()), parser.lines_skipped,
            sorted(parser._features))


def run(monkeypatch, use_native: bool, text: str, as_bytes: bool = False) -> tuple:
    monkeypatch.setattr(parser_module, "NATIVE", use_native)
    parser = LogParser()
    if as_bytes:
        parser.feed_bytes(text.encode("utf-8"))
    else:
        parser.feed(text)
    parser.finish()
    return snapshot(parser)


def both(monkeypatch, text: str, as_bytes: bool = False) -> tuple[tuple, tuple]:
    return run(monkeypatch, True, text, as_bytes), run(monkeypatch, False, text, as_bytes)


@pytest.mark.parametrize("window", [None, 700])
@pytest.mark.parametrize("as_bytes", [False, True])
@pytest.mark.parametrize("name", LOGS)
def test_fixture_logs_give_the_python_result(name, as_bytes, window, monkeypatch):
    if window:  # small windows cut between the two lines of a Primus step, and between rows
        monkeypatch.setattr(parser_module, "WINDOW", window)
    fast, slow = both(monkeypatch, (FIXTURES / name).read_text(), as_bytes)
    assert fast == slow


def test_clean_megatron_windows_are_read_natively(monkeypatch, window_spy):
    """Not a silent fallback: every window of a plain Megatron log goes through the scanner."""
    used = window_spy("_process_native")
    monkeypatch.setattr(parser_module, "WINDOW", 4096)
    parser = LogParser()
    parser.feed(long_log(n=300, extras=False))
    parser.finish()
    assert len(used) > 20 and all(used)
    assert parser.iterations_parsed == 300


@pytest.mark.parametrize("name", ["primus_b1.log", "primus_b2.log", "primus_b3.log"])
def test_primus_lines_printed_twice_are_read_natively(name, monkeypatch, window_spy):
    """Primus forwards the last rank's line, so every step is logged twice; the last one wins."""
    used = window_spy("_process_native")
    text = (FIXTURES / name).read_text()
    parser = LogParser()
    parser.feed(text)
    parser.finish()
    assert used and all(used)
    monkeypatch.setattr(parser_module, "NATIVE", False)
    assert snapshot(parser) == run(monkeypatch, False, text)


def test_long_thinned_log_gives_the_python_result(monkeypatch, tmp_path):
    monkeypatch.setattr(retention, "RETAIN", 400)
    text = long_log()
    path = tmp_path / "train.log"
    path.write_text(text)
    results = []
    for use_native in (True, False):
        monkeypatch.setattr(parser_module, "NATIVE", use_native)
        results.append(snapshot(parse_file(path, chunk_bytes=50_000)))
    assert results[0] == results[1]
    assert results[0][0]["iterations_parsed"] == 4000 and results[0][0]["iterations_kept"] < 4000


# --- generated lines ---------------------------------------------------------------------------
ODD = ["nan", "inf", "-inf", "1_0", "0x10", "1e999", "-0.0", "5.", ".5", "+3", "1.0e+00x", "",
       "1e-400", "123456789012345678901234.5", "9007199254740993", "0.1e23", "1e22", "NaN"]
numbers = st.one_of(
    st.floats(min_value=0, max_value=1e6, allow_nan=False).flatmap(
        lambda x: st.sampled_from([f"{x:.1f}", f"{x:.6E}", f"{x:.4f}", repr(x), f"{x:.3f}"])),
    st.sampled_from(ODD))
ordinary = numbers.filter(lambda t: t not in ODD)
rare_numbers = st.one_of(ordinary, ordinary, ordinary, st.sampled_from(ODD))  # odd ones 1 in 4
STAMPS = [None, "2026-03-06 14:24:37", "2026-03-06 14:24:37.918273", "2026-13-06 14:24:37",
          "0000-01-01 00:00:00", "2026-03-06T01:02:03.5", "2026-02-31 23:59:59.999999"]
PREFIXES = ["", " ", "[20251202 09:12:08][rank-7/8][INFO ] [--------trainer.py:2560] : ",
            "\x1b[32mINFO\x1b[0m [\x1b[36mrank-7/8\x1b[0m] : ", "[default0]:", "x", "[12] ", "[rank3]: "]


@st.composite
def iteration_line(draw, step: int) -> str:
    pick = lambda options: draw(st.sampled_from(options))  # noqa: E731
    opt = lambda: draw(st.booleans())  # noqa: E731
    num = lambda: draw(rare_numbers)  # noqa: E731
    out = [pick(PREFIXES)]
    stamp = pick(STAMPS)
    if stamp is not None:
        out.append(f"[{stamp}]" + " " * draw(st.integers(0, 3)))
    out.append("iteration" + " " * draw(st.integers(1, 3)) + f"{step:>8d}" + pick(["/", " / ", "/ "])
               + f"{1000:>8d} |")
    out.append(f" consumed samples: {step * 128:>12d} |")
    if opt():
        out.append(" skipped samples:            0 |")
    out.append(f" elapsed time per iteration (ms): {num()}" + (f"/{num()}" if opt() else "") + " |")
    mem = pick([None, "mem", "hip", "hip+rocm"])
    if mem == "mem":
        out.append(f" mem usages: {num()} |")
    elif mem:
        out.append(f" hip mem usage/free/total/usage_ratio: 153.81GB/102.17GB/255.98GB/{num()}%"
                   + pick(["", " ", "  "]) + "|")
        if mem == "hip+rocm":
            out.append(" rocm mem usage/free/total/usage_ratio: 1GB/2GB/3GB/40.1% |")
    if opt():
        form = pick(["plain", "pair", "avg"])
        label = pick(["throughput", "compute"])
        value = num() + (f"/{num()}" if form == "pair" else f" (avg {num()})" if form == "avg" else "")
        out.append(f" {label} per GPU (TFLOP/s/GPU): {value}" + pick([" |", "  |"]))
    if opt():
        label = pick(["tokens per GPU (tokens/s/GPU)", "tokens/s/GPU inst/harmonic mean"])
        out.append(f" {label}: {num()}" + (f"/{num()}" if opt() else "") + " |")
        if opt():
            out.append(" seq_length:  8192 |")
    if opt():
        out.append(" energy per GPU (J/iter/GPU): 1.0 | power per GPU (W/GPU): 700.0 |")
    if opt():
        out.append(f" learning rate: {num()} |")
    out.append(f" global batch size: {pick([128, 256]):>5d} |")
    loss = pick(["plain", "plain", "plain", "none", "late"])
    if loss == "plain":
        out.append(f" lm loss: {num()} |")
    if opt():
        out.append(" mtp_1 loss: 1.0E+00 |")
    if loss == "late":
        out.append(f" lm loss: {num()} |")
    out.append(" loss scale: 1.0 |")
    if opt():
        out.append(f" grad norm: {num()} |")
    if opt():
        out.append(" num zeros: 0.0 |")
    counters = pick(["0", "0", "0", "0", "1", "00"])
    out.append(f" number of skipped iterations: {counters:>3} | number of nan iterations: {pick(['0', '0', '0', '2']):>3}")
    tail = pick(["", "mem", "hip", "hip+rank"])
    if tail == "mem":
        out.append(f" | mem usages: {num()}")
    elif tail:
        out.append(f" | hip mem usage/free/total/usage_ratio: 231.55GB/56.43GB/287.98GB/{num()}%")
        if tail == "hip+rank":
            out.append("  | rocm mem usage/free/total/usage_ratio: 2GB/5GB/287.98GB/80.88%"
                       " | rank-3 rocm max mem usage/usage_ratio: 233.60GB/81.12%")
    out.append(pick([" |", "", " | ", " |\r", " |\t"]))
    return "".join(out) + "\n"


NOISE = ["gpu-node-07:1234:1290 [3] NCCL INFO Channel 05/0 : 3[3] -> 4[4] via P2P/IPC/read\n",
         "[Rank 0] (after 10 iterations) memory (MB) | allocated: 61234.56 | max allocated: 98765.43\n",
         " validation loss at iteration 10 | lm loss value: 3.5E+00 | lm loss PPL: 33.1 |\n",
         "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB\n",
         " [2026-03-06 14:24:37] iteration 5/10 | elapsed time per \x1b[0miteration (ms): 5.0 |\n",
         "caf\u00e9 \u2603 elapsed time per iteration (ms): 1 | iteration 3/4 |\n"]


@st.composite
def window(draw, most: int = 12) -> str:
    lines, step = [], 0
    for _ in range(draw(st.integers(1, most))):
        step += draw(st.sampled_from([1, 1, 1, 1, 0, 2]))
        if draw(st.integers(0, 5)) == 0:
            lines.append(draw(st.sampled_from(NOISE)))
        lines.append(draw(iteration_line(max(step, 1))))
    return "".join(lines)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=window(), as_bytes=st.booleans())
def test_generated_lines_give_the_python_result(text, as_bytes, monkeypatch):
    fast, slow = both(monkeypatch, text, as_bytes)
    assert fast == slow


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=window(most=80))
def test_generated_lines_past_retention_give_the_python_result(text, monkeypatch):
    # a tiny RETAIN and small windows: rows are thinned and folded while they are read
    monkeypatch.setattr(retention, "RETAIN", 8)
    monkeypatch.setattr(parser_module, "WINDOW", 3000)
    fast, slow = both(monkeypatch, text)
    assert fast == slow


# --- the number reader -------------------------------------------------------------------------
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_number_reader_is_exactly_float_for_every_double(x):
    for text in (repr(x), f"{x:.6E}", f"{x:.1f}" if abs(x) < 1e30 else repr(x), f"{x:.17g}"):
        assert native.parse_number(text) == float(text)
        assert math.copysign(1, native.parse_number(text)) == math.copysign(1, float(text))


@given(st.integers(0, 2**64 - 1))
def test_number_reader_is_exact_for_random_bit_patterns(bits):
    x = struct.unpack("<d", struct.pack("<Q", bits))[0]
    if math.isfinite(x):
        assert native.parse_number(repr(x)) == x


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "NaN", "1_0", "0x10", "", "+", ".", "1e",
                                  "1e+", "1.0e+00x", " 1", "1 ", "--1", "1..2", "e5"])
def test_number_reader_declines_what_is_not_a_plain_decimal(text):
    assert native.parse_number(text) is None


@pytest.mark.parametrize("text", ["5.", ".5", "+3", "-0.0", "1e999", "1e-400", "0.1e23",
                                  "123456789012345678901234.5", "9007199254740993", "00012.50"])
def test_number_reader_edge_spellings(text):
    assert native.parse_number(text) == float(text)


def test_random_decimal_spellings_round_like_float():
    rng = random.Random(5)
    for _ in range(20_000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 25)))
        cut = rng.randint(0, len(digits))
        text = f"{digits[:cut]}.{digits[cut:]}e{rng.randint(-330, 310)}"
        if text.startswith(".e") or text == ".":
            continue
        assert native.parse_number(text) == float(text), text


def test_scan_reports_an_iteration_line_it_could_not_read_as_suspicious():
    good = (" [2026-03-06 00:00:01] iteration        1/      10 | consumed samples:          128 |"
            " elapsed time per iteration (ms): 13800.0 | global batch size:   128 | lm loss: 2.0E+00 |"
            " loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n")
    scan = native.scan(good * 3, 1)
    assert scan.n == 3 and not scan.suspicious and list(scan.steps) == [1, 1, 1]
    odd = good.replace("13800.0", "nan")
    scan = native.scan(good + odd + "hello\n", 1)
    assert scan.n == 1 and scan.suspicious
    assert scan.pieces == [(1, odd + "hello\n")]
    assert native.scan(good.replace("consumed", "consum\u00e9d"), 1) is None  # non-ASCII str


# --- value counts (the fold of long logs) --------------------------------------------------------
@given(st.lists(st.one_of(st.sampled_from([0.0, -0.0, 1.5, 13800.1, math.nan, math.inf, -math.inf]),
                          st.floats(allow_nan=True))))
def test_value_counts_are_a_counter_of_the_finite_values(values):
    finite = Counter(v for v in values if math.isfinite(v))
    got = native.value_counts(array("d", values))
    assert got == dict(finite) and list(got) == list(finite)  # same keys, counts and order
    into = Counter({1.5: 2, 7.0: 1})
    assert native.value_counts(array("d", values), into=into) is into
    assert into == Counter({1.5: 2, 7.0: 1}) + finite
