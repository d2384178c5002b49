"""Primus line shapes: loguru prefix (B and legacy), the rewritten iteration line (B1/B2/B3/legacy
A), lifecycle banners and runner lines. Pure formatting."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .megatron_text import StepValues, stamp

RESET = "\x1b[0m"
LEVEL_COLOURS = {"DEBUG": "\x1b[34m\x1b[1m", "INFO": "\x1b[1m", "WARNING": "\x1b[33m\x1b[1m",
                 "ERROR": "\x1b[31m\x1b[1m"}
STYLES = ("b1", "b2", "b3", "legacy")


@dataclass(frozen=True)
class Averages:
    """Running averages the Primus extension prints as the Y of X/Y."""
    elapsed_ms: float
    tflops: float
    tokens_hmean: float


@dataclass(frozen=True)
class MemInfo:
    used_gb: float
    total_gb: float

    @property
    def free_gb(self) -> float:
        return self.total_gb - self.used_gb

    @property
    def pct(self) -> float:
        return 100.0 * self.used_gb / self.total_gb


def prefix(now: datetime, rank: int, world: int, level: str, module_tag: str, style: str,
           colour: bool = True) -> str:
    """`[YYYYMMDD HH:mm:ss][rank-r/w][LEVEL]<pad>[<--module>.py:<line>] : ` (legacy: `[INFO ] [...]`)."""
    date = now.strftime("%Y%m%d %H:%M:%S")
    if style == "legacy":
        tag = module_tag.rjust(23, "-")
        head = f"[{date}][rank-{rank}/{world}][{level[:5]:<5}] [{tag}] : "
        return head if not colour else _colour_head(date, rank, world, f"[{level[:5]:<5}] ", f"[{tag}] : ", level)
    tag = module_tag.rjust(27, "-")
    lvl = f"[{level}]".ljust(11)
    if not colour:
        return f"[{date}][rank-{rank}/{world}]{lvl}[{tag}] : "
    return _colour_head(date, rank, world, lvl, f"[{tag}] : ", level)


def _colour_head(date: str, rank: int, world: int, level_text: str, tag_text: str, level: str) -> str:
    c = LEVEL_COLOURS.get(level, "")
    return (f"[\x1b[32m{date}{RESET}][\x1b[36mrank-{rank}/{world}{RESET}]"
            f"{c}{level_text}{RESET}{c}{tag_text}")


def line(now: datetime, rank: int, world: int, level: str, module_tag: str, message: str,
         style: str, colour: bool = True) -> str:
    text = prefix(now, rank, world, level, module_tag, style, colour) + message
    return text + RESET if colour else text


def iteration_message(v: StepValues, avg: Averages | None, mem: MemInfo, now: datetime, style: str,
                      rank_last: int) -> str:
    """The iteration message after the prefix; `avg` None = warm-up step (single values, no tokens)."""
    head = f"[{stamp(now, True)}] " if style != "legacy" else " "
    segs = [f"iteration {v.step:8d}/{v.total:8d}", f"consumed samples: {v.consumed:12d}"]
    if avg is None:
        segs.append(f"elapsed time per iteration (ms): {v.elapsed_ms:.1f}")
        if style == "legacy":
            segs.append(_hip_mem(mem))
        segs.append(f"throughput per GPU (TFLOP/s/GPU): {v.tflops:.1f}")
    else:
        segs.append(f"elapsed time per iteration (ms): {v.elapsed_ms:.1f}/{avg.elapsed_ms:.1f}")
        if style == "legacy":
            segs.append(_hip_mem(mem))
            segs.append(f"throughput per GPU (TFLOP/s/GPU): {v.tflops:.1f}/{avg.tflops:.1f}")
            segs.append(f"tokens per GPU (tokens/s/GPU): {v.tokens:.1f}/{avg.tokens_hmean:.1f}")
        elif style == "b1":
            segs.append(f"throughput per GPU (TFLOP/s/GPU): {v.tflops:.1f}/{avg.tflops:.1f}  "
                        f"| tokens per GPU (tokens/s/GPU): {v.tokens:.1f}/{avg.tokens_hmean:.1f}")
        elif style == "b2":
            segs.append(f"throughput per GPU (TFLOP/s/GPU): {v.tflops:.1f}/{avg.tflops:.1f}  "
                        f"| tokens/s/GPU inst/harmonic mean: {v.tokens:.1f}/{avg.tokens_hmean:.1f}")
        else:
            segs.append(f"compute per GPU (TFLOP/s/GPU): {v.tflops:.1f} (avg {avg.tflops:.1f})  "
                        f"| tokens/s/GPU inst/harmonic mean: {v.tokens:.1f}/{avg.tokens_hmean:.1f}")
    segs.append(f"learning rate: {v.lr:.6E}")
    segs.append(f"global batch size: {v.global_batch:5d}")
    if v.loss is not None:
        segs.append(f"lm loss: {v.loss:.6E}")
    segs.append("loss scale: 1.0")
    segs.append(f"grad norm: {v.grad_norm:.3f}" if v.grad_norm is not None else "grad norm: nan")
    segs.append(f"number of skipped iterations: {v.skipped:3d}")
    segs.append(f"number of nan iterations: {v.nan_iters:3d}")
    if style == "legacy":
        return head + " | ".join(segs) + " |"
    rocm = MemInfo(mem.used_gb + 1.37, mem.total_gb)
    tail = f"{_hip_mem(mem)}  | rocm mem usage/free/total/usage_ratio: {_gb(rocm)}"
    if style == "b3":
        tail += f" | rank-{rank_last % 8} rocm max mem usage/usage_ratio: {rocm.used_gb + 0.68:.2f}GB/" \
                f"{100 * (rocm.used_gb + 0.68) / rocm.total_gb:.2f}%"
    return head + " | ".join(segs) + " | " + tail


def _gb(mem: MemInfo) -> str:
    return f"{mem.used_gb:.2f}GB/{mem.free_gb:.2f}GB/{mem.total_gb:.2f}GB/{mem.pct:.2f}%"


def _hip_mem(mem: MemInfo) -> str:
    return f"hip mem usage/free/total/usage_ratio: {_gb(mem)}"


def banner(title: str) -> list[str]:
    return ["=" * 80, title]


def runner_line(now: datetime, node_rank: int, host: str, level: str, message: str) -> str:
    """Runner shell lines (`runner/lib/common.sh`): console only, never in the tee'd log."""
    return f"[{now.strftime('%Y-%m-%d %H:%M:%S')}] [NODE-{node_rank}({host})] [{level}] {message}"
