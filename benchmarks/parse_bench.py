"""Parse-speed benchmark: a generated finished-run log of ``size_mb`` megabytes, parsed by ours
and by a transcription of the reference's approach (``benchmarks.reference_parse``) in one run.

Reports parse throughput (MB/s), the ratio to merely reading the same file's lines in Python,
the speed-up over the reference, and memory (RSS before parsing, peak RSS, growth, growth per
GB of log). Times are given twice: wall clock and this process's CPU time (the same figure on a
quiet host; on a busy one the wall clock also counts time other processes took, so the ratios
use CPU time). The line read runs once first so that every timing reads from the page cache.
The file is written to a temporary directory and deleted afterwards. ``iterations_parsed``
counts every distinct step; ``iterations_kept`` what the per-step curve holds (``metrics.iteration.Curve``).
Run: ``python -m benchmarks.parse_bench [size_mb] [megatron|primus] [--no-reference]``.
"""

from __future__ import annotations

import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import reference_parse
from cvs_tasks.metrics.parser import parse_file

LINE = (" [{date} {hh:02d}:{mm:02d}:{ss:09.6f}] iteration {step:>8d}/{total:>8d} | consumed samples: "
        "{consumed:>12d} | elapsed time per iteration (ms): {ms:.1f} | mem usages: {mem:.4f} | "
        "throughput per GPU (TFLOP/s/GPU): {tf:.1f} | learning rate: {lr:.6E} | global batch size: "
        "{gbs:>5d} | lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: {gn:.3f} | "
        "number of skipped iterations: {skip:>3d} | number of nan iterations: {nan:>3d} |\n")


PRIMUS_LINE = (  # Primus B3 (docs/log_formats.md#primus): loguru prefix with colours; each line printed twice
    "\x1b[32mINFO\x1b[0m [\x1b[32m{day} {hh:02d}:{mm:02d}:{isec:02d}\x1b[0m][\x1b[36mrank-7/8\x1b[0m]\x1b[34m"
    "\x1b[1m[DEBUG]    \x1b[0m\x1b[34m\x1b[1m[---------------utils.py:425] : [{date} {hh:02d}:{mm:02d}:"
    "{ss:09.6f}] iteration {step:>8d}/{total:>8d} | consumed samples: {consumed:>12d} | elapsed time "
    "per iteration (ms): {ms:.1f}/{ms:.1f} | compute per GPU (TFLOP/s/GPU): {tf:.1f} (avg {tf:.1f})  | "
    "tokens/s/GPU inst/harmonic mean: {tok:.1f}/{tok:.1f} | learning rate: {lr:.6E} | global batch "
    "size: {gbs:>5d} | lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: {gn:.3f} | number of skipped "
    "iterations: {skip:>3d} | number of nan iterations: {nan:>3d} | hip mem usage/free/total/usage_ratio: "
    "231.55GB/56.43GB/287.98GB/{mem:.2%}  | rocm mem usage/free/total/usage_ratio: 232.92GB/55.06GB/"
    "287.98GB/80.88% | rank-3 rocm max mem usage/usage_ratio: 233.60GB/81.12%\n")


READ_PASSES = 5


def write_log(path: Path, size_mb: float, seed: int = 7, dialect: str = "megatron") -> int:
    """Write a finished run of about ``size_mb``: steps 1..N of N; returns the number of lines.

    ``dialect`` "primus" writes Primus B3 lines, each twice (as rank 0 forwards the last rank's)."""
    line, copies, line_bytes = (PRIMUS_LINE, 2, 760) if dialect == "primus" else (LINE, 1, 385)
    rng = random.Random(seed)
    total = max(1, int(size_mb * 1024 * 1024 / (line_bytes * copies)))
    gbs, clock = 128, 0.0
    with open(path, "w", encoding="utf-8") as out:
        for first in range(1, total + 1, 5000):
            batch = []
            for step in range(first, min(first + 5000, total + 1)):
                ms = 13800.0 + rng.uniform(-150, 150)
                clock += ms / 1000.0
                day, rem = divmod(clock, 86400)
                hh, rem = divmod(rem, 3600)
                mm, ss = divmod(rem, 60)
                date = f"2026-03-{6 + int(day) % 20:02d}"
                text = line.format(
                    date=date, day=date.replace("-", ""), hh=int(hh), mm=int(mm), ss=ss, isec=int(ss), step=step,
                    total=total, consumed=step * gbs, ms=ms, mem=0.87 + rng.uniform(-0.01, 0.01),
                    tf=488.3 * 13800.0 / ms, tok=gbs * 8192 * 1000.0 / ms / 8, lr=1.5e-5, gbs=gbs,
                    loss=2.0 + 10.0 / (1 + step / 500), gn=1.0 + rng.random(), skip=0, nan=0)
                batch.extend([text] * copies)
            out.write("".join(batch))
    return total * copies


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _timed(fn):
    """(result, wall seconds, CPU seconds of this process): CPU time is what a busy host can't inflate."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def _read_lines(path: Path) -> int:
    count = 0
    with open(path, encoding="utf-8", errors="replace") as handle:
        for _ in handle:
            count += 1
    return count


def run(size_mb: float = 1024, seq_length: int = 8192, world_size: int = 8,
        dialect: str = "megatron", reference: bool = True) -> dict:
    """Generate, read, parse with ours and with the reference's approach, delete; the figures."""
    with tempfile.TemporaryDirectory(prefix="cvs_parse_bench_") as tmp:
        path = Path(tmp) / "training.log"
        lines = write_log(path, size_mb, dialect=dialect)
        size = path.stat().st_size
        _read_lines(path)  # warm the page cache so every timing reads from memory
        # the baseline the parse CPU is posed against (benchmarks/parse.py): the least of a few passes
        _, read_s, read_cpu = min((_timed(lambda: _read_lines(path)) for _ in range(READ_PASSES)), key=lambda t: t[2])
        rss_before = _rss_mb()
        parser, parse_s, parse_cpu = _timed(
            lambda: parse_file(path, seq_length=seq_length, world_size=world_size))
        metrics, metrics_s, _ = _timed(parser.metrics)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        ref_s = ref_cpu = None
        if reference:  # after ours: its whole-text copies must not inflate our peak
            _, ref_s, ref_cpu = _timed(lambda: reference_parse.parse(path, parser.planned))
    mb = size / 2**20
    return {
        "size_mb": round(mb, 1),
        "dialect": dialect,
        "lines": lines,
        "iterations_parsed": parser.iterations_parsed,
        "iterations_kept": len(parser.iterations),
        "read_lines_s": round(read_s, 3),
        "read_lines_mb_s": round(mb / read_s, 1),
        "parse_s": round(parse_s, 3),
        "parse_mb_s": round(mb / parse_s, 1),
        "parse_vs_read_ratio": round(parse_s / read_s, 2),
        "read_lines_cpu_s": round(read_cpu, 3),
        "parse_cpu_s": round(parse_cpu, 3),
        "parse_cpu_mb_s": round(mb / parse_cpu, 1),
        "reference_s": None if ref_s is None else round(ref_s, 3),
        "reference_cpu_s": None if ref_cpu is None else round(ref_cpu, 3),
        "speedup_vs_reference_cpu": None if ref_cpu is None else round(ref_cpu / parse_cpu, 2),
        "metrics_s": round(metrics_s, 3),
        "rss_before_parse_mb": round(rss_before, 1),
        "peak_rss_mb": round(peak, 1),
        "rss_growth_mb": round(peak - rss_before, 1),
        "rss_growth_mb_per_gb": round((peak - rss_before) / (mb / 1024), 1),
        "errors": len(parser.errors),
        "tokens_per_gpu": metrics["training.tokens_per_gpu"],
        "step_time_p50_ms": metrics["training.step_time_p50_ms"],
    }


if __name__ == "__main__":
    size = float(sys.argv[1]) if len(sys.argv) > 1 else 1024
    print(json.dumps(run(size_mb=size, dialect=sys.argv[2] if len(sys.argv) > 2 else "megatron",
                         reference="--no-reference" not in sys.argv), indent=2))
