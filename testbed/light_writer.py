"""The light testbed's one writer: simulated Megatron-LM training logs for every node, at a set line rate.

Run as its own process (``python -m testbed.light_writer DIR --nodes N --rate R``) so the harness
under test shares nothing with it but the files. Node ``i``'s log is ``DIR/node<i>/train.log``;
each log starts with a header line at once, then gets ``R`` iteration lines a second, as the
simulated trainer prints them (ROCm dialect, ``simtrainer.megatron_text``), the nodes' writes
spread evenly over each second so the machine sees a steady load rather than a burst a second.
SIGTERM stops it (files closed).
"""

from __future__ import annotations

import argparse
import resource
import signal
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

from testbed.trainer.workspace.simtrainer.megatron_text import StepValues, iteration_line

TICK_S = 0.05
TOTAL_STEPS = 10**7  # "iteration N/TOTAL": a job that never finishes while the writer runs
GLOBAL_BATCH = 128
HEADER = "> building GPT model ...\n"


def log_path(root: Path, index: int) -> Path:
    return root / f"node{index}" / "train.log"


def exit_path(root: Path, index: int) -> Path:
    return root / f"node{index}" / "train.exit"


def line(index: int, step: int, when: datetime) -> str:
    """Node ``index``'s iteration line ``step`` (values vary a little per node and step)."""
    wobble = ((index * 7919 + step * 104729) % 1000) / 1000.0
    values = StepValues(step=step, total=TOTAL_STEPS, consumed=step * GLOBAL_BATCH, elapsed_ms=1000.0 + 40 * wobble,
                        tflops=480.0 + 10 * wobble, tokens=0.0, lr=1.5e-5, global_batch=GLOBAL_BATCH,
                        loss=2.0 + 10.0 / (1 + step / 500), grad_norm=1.0 + wobble, mem_fraction=0.87)
    return iteration_line(values, when, "rocm") + "\n"


def due(count: int, rate: float, elapsed: float) -> int:
    """How many lines, over all ``count`` nodes, are due ``elapsed`` seconds after the start (pure)."""
    return int(count * rate * elapsed)


def run(root: Path, count: int, rate: float, stop=lambda: False) -> int:
    """Append lines round-robin over the nodes until ``stop()``; returns lines written."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < count + 64 <= hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    files = []
    for index in range(count):
        log_path(root, index).parent.mkdir(parents=True, exist_ok=True)
        fh = open(log_path(root, index), "a", encoding="utf-8")  # noqa: SIM115 - held for the run
        fh.write(HEADER)  # every log has bytes from the start: a follower's first frame needs no wait
        fh.flush()
        files.append(fh)
    steps = [0] * count
    written, started = 0, time.monotonic()
    clock = datetime(2026, 3, 6, 8, 0, 0)
    try:
        while not stop():
            target = due(count, rate, time.monotonic() - started)
            touched = set()
            while written < target:
                index = written % count
                steps[index] += 1
                files[index].write(line(index, steps[index], clock + timedelta(seconds=steps[index] / rate)))
                touched.add(index)
                written += 1
            for index in touched:
                files[index].flush()
            time.sleep(TICK_S)
    finally:
        for fh in files:
            fh.close()
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--rate", type=float, default=1.0, help="iteration lines per second per node")
    args = ap.parse_args(argv)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    run(args.root, args.nodes, args.rate, stop=lambda: bool(stopping))
    return 0


if __name__ == "__main__":
    sys.exit(main())
