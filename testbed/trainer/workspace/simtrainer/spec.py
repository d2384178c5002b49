"""What one simulated job was asked to do (filled from env vars / CLI flags by the frontends)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .faults import FaultPlan, parse_faults
from .models import ModelSpec
from .node_facts import node_fault


@dataclass
class JobSpec:
    backend: str                 # megatron | primus
    model: ModelSpec
    micro_batch: int
    global_batch: int
    train_iters: int
    seq: int
    tp: int = 1
    pp: int = 1
    precision: str = "BF16"
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "localhost"
    master_port: int = 6000
    gpus_per_node: int = 8
    step_ms: float = 1000.0
    time_scale: float = 1.0
    startup_s: float = 0.5
    nccl_timeout_s: float = 30.0
    rdzv_timeout_s: float = 60.0
    hang_s: float = 3600.0
    faults: FaultPlan = field(default_factory=FaultPlan)
    dialect: str = "rocm"        # megatron: rocm | upstream
    primus_style: str = "b3"
    colour: bool = True
    gpu_name: str = "MI300X"
    save_dir: Path | None = None
    save_interval: int = 0
    load_dir: Path | None = None
    disable_last_saving: bool = True
    exit_interval: int | None = None  # Megatron's --exit-interval: stop after this iteration
    extra_args: dict = field(default_factory=dict)
    startup_errors: list = field(default_factory=list)  # what Megatron raises at start (primus_overrides)

    @property
    def world(self) -> int:
        return self.nnodes * self.gpus_per_node

    @property
    def last_node(self) -> int:
        return self.nnodes - 1

    @property
    def global_rank0(self) -> int:
        """Global rank of this node's first GPU."""
        return self.node_rank * self.gpus_per_node


def env_float(env: dict, name: str, default: float) -> float:
    try:
        return float(env.get(name, "") or default)
    except ValueError:
        raise SystemExit(f"{name}={env.get(name)!r} is not a number") from None


def env_int(env: dict, name: str, default: int) -> int:
    try:
        return int(float(env.get(name, "") or default))
    except ValueError:
        raise SystemExit(f"{name}={env.get(name)!r} is not an integer") from None


def node_fault_entries(text: str, rank: int) -> str:
    """This node's own faults (``slow=1.5``, ``crash@3``) as SIM_FAULT entries aimed at its rank."""
    out = []
    for item in (i.strip() for i in text.replace("\n", ",").split(",")):
        if item.startswith("slow="):
            out.append(f"slow_node={rank}:{item[len('slow='):]}")
        elif "@" in item:
            name, _, step = item.partition("@")
            out.append(f"{name}@{step.split(':')[0]}:{rank}")
        elif item:
            out.append(item)  # parse_faults names what is wrong with it
    return ",".join(out)


def apply_common_env(spec: JobSpec, env: dict | None = None) -> JobSpec:
    """Distributed and `SIM_*` settings shared by both frontends."""
    env = dict(os.environ if env is None else env)
    spec.nnodes = max(1, env_int(env, "NNODES", spec.nnodes))
    spec.node_rank = env_int(env, "NODE_RANK", spec.node_rank)
    spec.master_addr = env.get("MASTER_ADDR") or spec.master_addr
    spec.master_port = env_int(env, "MASTER_PORT", spec.master_port)
    spec.gpus_per_node = max(1, env_int(env, "GPUS_PER_NODE", spec.gpus_per_node))
    spec.step_ms = env_float(env, "SIM_STEP_MS", spec.step_ms)
    spec.time_scale = env_float(env, "SIM_TIME_SCALE", spec.time_scale)
    spec.startup_s = env_float(env, "SIM_STARTUP_S", spec.startup_s)
    spec.nccl_timeout_s = env_float(env, "SIM_NCCL_TIMEOUT_S", spec.nccl_timeout_s)
    spec.rdzv_timeout_s = env_float(env, "SIM_RDZV_TIMEOUT_S", spec.rdzv_timeout_s)
    spec.hang_s = env_float(env, "SIM_HANG_S", spec.hang_s)
    spec.faults = parse_faults(",".join(filter(None, [env.get("SIM_FAULT"),
                                                      node_fault_entries(node_fault(env), spec.node_rank)])))
    only = (env.get("SIM_FAULT_PRECISION") or "").strip().upper()
    if only and only != spec.precision.upper():
        spec.faults = parse_faults(None)  # SIM_FAULT_PRECISION: fault only the combo with this precision
    if spec.node_rank < 0 or spec.node_rank >= spec.nnodes:
        raise SystemExit(f"NODE_RANK={spec.node_rank} is outside 0..{spec.nnodes - 1} (NNODES={spec.nnodes})")
    return spec
