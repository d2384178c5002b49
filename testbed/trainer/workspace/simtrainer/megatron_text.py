"""Megatron-LM line shapes (upstream and the ROCm fork): iteration, start-up, checkpoint, summary.

Pure formatting: every function takes values (including the wall-clock time) and returns text.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class StepValues:
    step: int
    total: int
    consumed: int
    elapsed_ms: float
    tflops: float
    tokens: float
    lr: float
    global_batch: int
    loss: float | None          # None = NaN loss (Megatron omits the segment)
    grad_norm: float | None     # None = nan
    mem_fraction: float
    skipped: int = 0
    nan_iters: int = 0


def stamp(now: datetime, micro: bool) -> str:
    return now.strftime("%Y-%m-%d %H:%M:%S.%f" if micro else "%Y-%m-%d %H:%M:%S")


def iteration_line(v: StepValues, now: datetime, dialect: str) -> str:
    """One `training_log` line; dialect `rocm` (mem usages, second timestamps) or `upstream`."""
    rocm = dialect != "upstream"
    parts = [f" [{stamp(now, micro=not rocm)}] iteration {v.step:8d}/{v.total:8d} |",
             f" consumed samples: {v.consumed:12d} |",
             f" elapsed time per iteration (ms): {v.elapsed_ms:.1f} |"]
    if rocm:
        parts.append(f" mem usages: {v.mem_fraction:.4f} |")
    parts.append(f" throughput per GPU (TFLOP/s/GPU): {v.tflops:.1f} |")
    parts.append(f" learning rate: {v.lr:.6E} |")
    parts.append(f" global batch size: {v.global_batch:5d} |")
    if v.loss is not None:
        parts.append(f" lm loss: {v.loss:.6E} |")
    parts.append(" loss scale: 1.0 |")
    parts.append(f" grad norm: {v.grad_norm:.3f} |" if v.grad_norm is not None else " grad norm: nan |")
    parts.append(f" number of skipped iterations: {v.skipped:3d} |")
    parts.append(f" number of nan iterations: {v.nan_iters:3d} |")
    return "".join(parts)


def arguments_dump(args: dict[str, object]) -> list[str]:
    """The `arguments` block: names dot-padded to 48 chars, sorted case-insensitively."""
    lines = ["------------------------ arguments ------------------------"]
    for name in sorted(args, key=str.lower):
        lines.append(f"  {name} {'.' * max(48 - len(name) - 1, 3)} {args[name]}")
    lines.append("-------------------- end of arguments ---------------------")
    return lines


def datetime_line(label: str, now: datetime, micro: bool) -> str:
    return f"[{label}] datetime: {stamp(now, micro)} "


def memory_report(rank: int, after: int, allocated_mb: float, max_alloc_mb: float, reserved_mb: float) -> str:
    return (f"[Rank {rank}] (after {after} iterations) memory (MB) | allocated: {allocated_mb:.2f} | "
            f"max allocated: {max_alloc_mb:.2f} | reserved: {reserved_mb:.2f} | max reserved: {reserved_mb:.2f}")


def save_start(step: int, directory: str, now: datetime) -> str:
    return f"[{stamp(now, True)}] saving checkpoint at iteration {step:7d} to {directory} in torch_dist format"


def save_done(step: int, directory: str, now: datetime, tp: int, pp: int) -> str:
    return (f"  [{stamp(now, True)}] successfully saved checkpoint from iteration {step:7d} to {directory} "
            f"[ t 1/{tp}, p 1/{pp} ]")


def load_start(directory: str, step: int, distributed: bool) -> str:
    kind = "distributed checkpoint" if distributed else "checkpoint"
    return f" loading {kind} from {directory} at iteration {step}"


def load_done(directory: str, step: int, tp: int, pp: int) -> str:
    return f"  successfully loaded checkpoint from {directory} [ t 1/{tp}, p 1/{pp} ] at iteration {step}"


def no_checkpoint(directory: str) -> list[str]:
    return [f"WARNING: could not find the metadata file {directory}/latest_checkpointed_iteration.txt",
            "    will not load any checkpoints and will start from random"]


def rocm_summary(steps: list[StepValues], global_batch: int, seq: int, world: int) -> list[str]:
    """The four lines the ROCm fork's train_llama3.sh appends (drop first two and last sample)."""
    window = steps[2:-1] if len(steps) > 3 else steps
    if not window:
        return []
    mean_tflops = sum(s.tflops for s in window) / len(window)
    mean_ms = sum(s.elapsed_ms for s in window) / len(window)
    mean_mem = sum(s.mem_fraction for s in window) / len(window)
    tokens = global_batch * seq * 1000 / (mean_ms * world)
    return [f"throughput per GPU: {mean_tflops:.2f}",
            f"elapsed time per iteration: {mean_ms:.2f}",
            f"tokens/GPU/s: {tokens:.6f}",
            f"mem usages: {mean_mem:.4f}"]


def startup_lines(tp: int, pp: int, seed: int = 1234) -> list[str]:
    return ["> initializing torch distributed ...",
            f"> initialized tensor model parallel with size {tp}",
            f"> initialized pipeline model parallel with size {pp}",
            f"> setting random seeds to {seed} ...",
            "> compiling dataset index builder ...",
            "make: Entering directory '/workspace/Megatron-LM/megatron/core/datasets'",
            "make: Nothing to be done for 'default'.",
            "make: Leaving directory '/workspace/Megatron-LM/megatron/core/datasets'",
            ">>> done with dataset index builder. Compilation time: 0.061 seconds"]
