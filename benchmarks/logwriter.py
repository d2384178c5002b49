"""A stand-in training job for the polling benchmark: grows a Megatron-LM log at a steady rate.

Run as its own process (``python -m benchmarks.logwriter PATH EXIT_PATH --mb 200 --rate 8``) so
the harness under test shares nothing with it but the file. It writes ROCm-fork iteration lines
interleaved with the other lines a real log carries (NCCL info, warnings, memory reports), ends
with the last iteration line ``N/N`` and the summary, then writes the exit status like the job
wrapper does. SIGTERM stops it at once.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from datetime import datetime, timedelta

ITERATION = (" [{stamp}] iteration {step:8d}/{total:8d} | consumed samples: {consumed:12d} | "
             "elapsed time per iteration (ms): {ms:.1f} | mem usages: {mem:.4f} | "
             "throughput per GPU (TFLOP/s/GPU): {tf:.1f} | learning rate: {lr:.6E} | "
             "global batch size: {gbs:5d} | lm loss: {loss:.6E} | loss scale: 1.0 | "
             "grad norm: {gn:.3f} | number of skipped iterations:   0 | number of nan iterations:   0 |\n")
NOISE = (
    "gpu-node-07:1234:1290 [3] NCCL INFO Channel 05/0 : 3[3] -> 4[4] via P2P/IPC/read\n",
    "[rank5]:[W1203 10:44:01.123456 ProcessGroupNCCL.cpp:4115] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS "
    "is the default now, this environment variable is thus deprecated. (function operator())\n",
    "[Rank 0] (after 10 iterations) memory (MB) | allocated: 61234.56 | max allocated: 98765.43 | "
    "reserved: 104857.60 | max reserved: 104857.60\n",
    "/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:87: UserWarning: None of the "
    "inputs have requires_grad=True. Gradients will be None\n",
)
NOISE_EVERY = 9  # one other line per this many iteration lines
GBS = 128


def iteration_line(step: int, total: int, when: datetime, rng: random.Random) -> str:
    ms = 13800.0 + rng.uniform(-150.0, 150.0)
    return ITERATION.format(
        stamp=when.strftime("%Y-%m-%d %H:%M:%S"), step=step, total=total, consumed=step * GBS, ms=ms,
        mem=0.87 + rng.uniform(-0.01, 0.01), tf=488.3 * 13800.0 / ms, lr=1.5e-5, gbs=GBS,
        loss=2.0 + 10.0 / (1 + step / 500), gn=1.0 + rng.random())


def planned_iterations(target_bytes: int) -> int:
    """How many iterations make a log of at least ``target_bytes`` (noise lines included)."""
    rng = random.Random(0)
    sample = len(iteration_line(1, 10**7, datetime(2026, 1, 1), rng).encode())
    noise = sum(len(n) for n in NOISE) / len(NOISE) / NOISE_EVERY
    return int(target_bytes / (sample + noise) * 1.01) + 1


def chunk(start: int, count: int, total: int, clock: datetime, rng: random.Random) -> tuple[str, datetime]:
    out = []
    for step in range(start, start + count):
        clock += timedelta(milliseconds=13800)
        out.append(iteration_line(step, total, clock, rng))
        if step % NOISE_EVERY == 0:
            out.append(NOISE[step % len(NOISE)])
    return "".join(out), clock


def grow(path: str, exit_path: str, target_mb: float, rate_mb_s: float, tick_s: float = 0.05,
         seed: int = 11) -> int:
    """Append lines at ``rate_mb_s`` until the planned last iteration; returns bytes written."""
    rng = random.Random(seed)
    total = planned_iterations(int(target_mb * 2**20))
    per_tick_bytes = rate_mb_s * 2**20 * tick_s
    line_bytes = len(iteration_line(1, total, datetime(2026, 1, 1), rng))
    per_tick = max(1, int(per_tick_bytes / line_bytes))
    clock = datetime(2026, 3, 6, 8, 0, 0)
    written, step = 0, 1
    started = time.monotonic()
    with open(path, "a", encoding="utf-8") as out:
        out.write("> building GPT model ...\n[after dataloaders are built] datetime: 2026-03-06 08:00:00\n")
        tick = 0
        while step <= total:
            count = min(per_tick, total - step + 1)
            text, clock = chunk(step, count, total, clock, rng)
            out.write(text)
            out.flush()
            written += len(text)
            step += count
            tick += 1
            lag = started + tick * tick_s - time.monotonic()
            if lag > 0:
                time.sleep(lag)
        out.write("[after training is done] datetime: 2026-03-07 08:00:00\n")
    tmp = exit_path + ".tmp"
    with open(tmp, "w") as fh:
        fh.write("0\n")
    os.replace(tmp, exit_path)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("exit_path")
    ap.add_argument("--mb", type=float, default=200.0, help="final log size (MiB)")
    ap.add_argument("--rate", type=float, default=8.0, help="growth rate (MiB/s)")
    args = ap.parse_args(argv)
    grow(args.path, args.exit_path, args.mb, args.rate)
    return 0


if __name__ == "__main__":
    sys.exit(main())
