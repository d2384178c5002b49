"""Parse throughput: ``benchmarks.parse_bench`` on a >= 1 GB log, and on one 8x smaller for memory.

Each size runs in its own Python process, so the peak RSS of one cannot hide in the other's
(``ru_maxrss`` only ever grows). Memory is "flat" when parsing the 8x larger log does not take
more than twice the memory growth of the small one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.common import at_least, at_most, row

MB_S_TARGET = 200.0
RATIO_TARGET = 6.0
MEMORY_GROWTH_TARGET = 2.0  # growth(8x log) / growth(log)
REPO = Path(__file__).resolve().parents[1]


def measure(size_mb: float, timeout: float, dialect: str = "megatron") -> dict[str, Any]:
    """``python -m benchmarks.parse_bench SIZE DIALECT`` in a fresh process; its JSON answer."""
    done = subprocess.run([sys.executable, "-m", "benchmarks.parse_bench", str(size_mb), dialect], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"parse_bench {size_mb} MB exited {done.returncode}: {' | '.join(tail)}")
    return json.loads(done.stdout)


def run(size_mb: float = 1024.0, timeout: float = 300.0) -> list[dict[str, Any]]:
    small = measure(size_mb / 8, timeout)
    big = measure(size_mb, timeout)
    primus = measure(size_mb / 4, timeout, "primus")
    mb_s, ratio = big["parse_mb_s"], big["parse_vs_read_ratio"]
    scanner = "native scanner" if big.get("native_scanner") else "pure-Python path (scanner not built)"
    context = (f"{big['size_mb']:.0f} MiB, {big['lines']} lines, {scanner}, parsed in {big['parse_s']:.1f}s; "
               f"plain line read {big['read_lines_s']:.2f}s ({big['read_lines_mb_s']:.0f} MB/s)")
    small_growth, big_growth = max(small["rss_growth_mb"], 1.0), big["rss_growth_mb"]
    return [
        at_least(f"parse.mb_s[{big['size_mb']:.0f}MiB]", mb_s, MB_S_TARGET, "MB/s",
                 context + "; the reference's approach: about 40 MB/s (issue #8)"),
        at_most("parse.vs_plain_read", ratio, RATIO_TARGET, "x plain line read", context),
        at_most("parse.memory_growth", big_growth / small_growth, MEMORY_GROWTH_TARGET,
                "x (8x larger log)",
                f"RSS growth while parsing {big['size_mb']:.0f} MiB: {big_growth:.0f} MiB "
                f"(peak {big['peak_rss_mb']:.0f} MiB); {small['size_mb']:.0f} MiB: {small['rss_growth_mb']:.0f} MiB (peak {small['peak_rss_mb']:.0f} MiB)"),
        row("parse.iterations", big["iterations_parsed"], "steps", f"= {big['lines']} lines",
            big["iterations_parsed"] == big["lines"], "every iteration line of the generated log parsed"),
        at_least(f"parse.primus_mb_s[{primus['size_mb']:.0f}MiB]", primus["parse_mb_s"], MB_S_TARGET, "MB/s",
                 f"Primus B3 lines (colour prefix, hip memory, every step printed twice), "
                 f"{primus['lines']} lines, {primus['iterations_parsed']} steps, "
                 f"{primus['parse_vs_read_ratio']:.1f}x plain line read"),
    ]
