"""How each backend speaks: which node prints what, with which prefix.

MegatronVoice prints bare lines (rank-0 lines on node 0, iteration lines on the last node, plus the
ROCm fork's summary); PrimusVoice wraps worker lines in the loguru prefix and adds the runtime's
lifecycle banners and the runner's console lines.
"""
from __future__ import annotations

import os
import socket
from datetime import datetime

from . import megatron_text as mt
from . import primus_text as pt
from .output import Output
from .spec import JobSpec

GPU_MEMORY_GB = {"MI300X": 191.98, "MI325X": 255.98, "MI355X": 287.98}


def now() -> datetime:
    return datetime.now()


def env_lines() -> list[str]:
    """The launcher's echo of its communication settings (benign, but NCCL-looking)."""
    names = ["NCCL_DEBUG", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_GID_INDEX",
             "NCCL_IB_HCA", "TORCH_NCCL_ASYNC_ERROR_HANDLING"]
    lines = [f"NCCL_DEBUG={os.environ.get('NCCL_DEBUG', 'ERROR')}"]
    lines += [f"{n}={os.environ[n]}" for n in names[1:] if os.environ.get(n)]
    return lines


def torchrun_banner() -> list[str]:
    t = now()
    return [f"W{t.strftime('%m%d %H:%M:%S')}.{t.microsecond:06d} {os.getpid()} torch/distributed/run.py:793] ",
            f"W{t.strftime('%m%d %H:%M:%S')}.{t.microsecond:06d} {os.getpid()} torch/distributed/run.py:793] "
            "*****************************************",
            f"W{t.strftime('%m%d %H:%M:%S')}.{t.microsecond:06d} {os.getpid()} torch/distributed/run.py:793] "
            "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your "
            "system being overloaded, please further tune the variable for optimal performance in your "
            "application as needed. ",
            f"W{t.strftime('%m%d %H:%M:%S')}.{t.microsecond:06d} {os.getpid()} torch/distributed/run.py:793] "
            "*****************************************"]


def arguments(spec: JobSpec) -> dict[str, object]:
    m = spec.model
    args = {"seq_length": spec.seq, "max_position_embeddings": spec.seq, "global_batch_size": spec.global_batch,
            "micro_batch_size": spec.micro_batch, "world_size": spec.world,
            "tensor_model_parallel_size": spec.tp, "pipeline_model_parallel_size": spec.pp,
            "context_parallel_size": 1, "data_parallel_size": max(spec.world // (spec.tp * spec.pp), 1),
            "num_layers": m.layers, "hidden_size": m.hidden, "ffn_hidden_size": m.ffn,
            "num_attention_heads": m.heads, "num_query_groups": m.groups, "padded_vocab_size": m.vocab,
            "train_iters": spec.train_iters, "log_interval": 1, "log_throughput": True,
            **precision_arguments(spec.precision),
            "mock_data": True, "eval_iters": 0, "distributed_timeout_minutes": 10,
            "save": str(spec.save_dir) if spec.save_dir else None, "save_interval": spec.save_interval or None,
            "load": str(spec.load_dir) if spec.load_dir else None, "seed": 1234}
    args.update({k.removeprefix("cli:"): v for k, v in spec.extra_args.items()})  # Primus: overrides merged last
    return args


def precision_arguments(precision: str) -> dict[str, object]:
    """Megatron's precision flags: FP8 delayed or MXFP8 recipe, MXFP4 through fp4, else BF16/FP16."""
    name = precision.upper()
    fp8 = name in ("FP8", "MXFP8")
    return {"bf16": name != "FP16", "fp16": name == "FP16", "fp8": "hybrid" if fp8 else None,
            "fp8_recipe": ("mxfp8" if name == "MXFP8" else "delayed") if fp8 else None,
            "fp4": "e2m1" if name == "MXFP4" else None}


class MegatronVoice:
    script = "pretrain_gpt.py"

    def __init__(self, spec: JobSpec, out: Output):
        self.spec, self.out = spec, out
        self.micro = spec.dialect == "upstream"
        self.host = socket.gethostname()

    def _node0(self, *lines: str) -> None:
        if self.spec.node_rank == 0:
            self.out.worker(*lines)

    def startup(self) -> None:
        s = self.spec
        self.out.worker(*env_lines(), *torchrun_banner())
        self._node0(f"using world size: {s.world}, data-parallel size: {max(s.world // (s.tp * s.pp), 1)}, "
                    f"context-parallel size: 1, tensor-model-parallel size: {s.tp}, "
                    f"pipeline-model-parallel size: {s.pp}",
                    *mt.arguments_dump(arguments(s)), *mt.startup_lines(s.tp, s.pp),
                    "time to initialize megatron (seconds): 3.412",
                    mt.datetime_line("after megatron is initialized", now(), self.micro),
                    "building GPT model ...",
                    f" > number of parameters on (tensor, pipeline) model parallel rank (0, 0): "
                    f"{int(s.model.params_b * 1e9 / (s.tp * s.pp))}",
                    mt.datetime_line("after model, optimizer, and learning rate scheduler are built", now(),
                                     self.micro))

    def datasets(self) -> None:
        cache = os.environ.get("DATA_CACHE_PATH")
        lines = ["> building train, validation, and test datasets ...",
                 "> building train, validation, and test datasets for GPT ..."]
        if cache:
            lines.append("INFO:megatron.core.datasets.gpt_dataset:Build and save the MockGPTDataset train indices")
        else:
            lines.append("WARNING:megatron.core.datasets.gpt_dataset:Unable to save MockGPTDataset indexes "
                         "because path_to_cache is None")
        lines += ["> finished creating GPT datasets ...",
                  mt.datetime_line("after dataloaders are built", now(), self.micro),
                  "done with setup ...", "training ...",
                  mt.datetime_line("before the start of training step", now(), self.micro)]
        self._node0(*lines)

    def rank0(self, *lines: str) -> None:
        self._node0(*lines)

    def iteration(self, values: mt.StepValues, avg, first_of_run: bool) -> None:
        if self.spec.node_rank == self.spec.last_node:
            self.out.worker(mt.iteration_line(values, now(), self.spec.dialect))
        if first_of_run and self.spec.node_rank == 0:
            used = values.mem_fraction * GPU_MEMORY_GB.get(self.spec.gpu_name, 191.98) * 1024
            self.out.worker(mt.memory_report(0, values.step, used * 0.55, used * 0.93, used),
                            "Theoretical memory footprints: weight and optimizer=137681.57 MB, "
                            "activation=59311.94 MB, total=196993.51 MB")

    def finished(self, steps: list[mt.StepValues]) -> None:
        s = self.spec
        self._node0(mt.datetime_line("after training is done", now(), self.micro))
        if s.dialect != "upstream" and s.node_rank == s.last_node:
            self.out.worker(*mt.rocm_summary(steps, s.global_batch, s.seq, s.world))

    def failed(self, reason: str, code: int) -> None:
        """After the failure texts: nothing more for plain torchrun."""

    def raw(self, *lines: str) -> None:
        self.out.worker(*lines)


class PrimusVoice(MegatronVoice):
    script = "primus/cli/main.py"

    def __init__(self, spec: JobSpec, out: Output):
        super().__init__(spec, out)
        self.micro = True

    def _log(self, rank: int, level: str, tag: str, *messages: str) -> list[str]:
        return [pt.line(now(), rank, self.spec.world, level, tag, m, self.spec.primus_style, self.spec.colour)
                for m in messages]

    def _node0(self, *lines: str) -> None:
        if self.spec.node_rank == 0:
            self.out.worker(*self._log(0, "DEBUG", "utils.py:425", *lines))

    def _info0(self, tag: str, *messages: str) -> None:
        if self.spec.node_rank == 0:
            self.out.worker(*self._log(0, "INFO", tag, *messages))

    def startup(self) -> None:
        s = self.spec
        overrides = {k: v for k, v in s.extra_args.items() if k.startswith("cli:")}
        self.out.worker(*env_lines(), *torchrun_banner())
        rank = s.global_rank0
        self.out.worker(*self._log(rank, "INFO", "train_runtime.py:141",
                                   f"[Primus:Env] rank={rank}, world_size={s.world}, local_rank=0, "
                                   f"master_addr={s.master_addr}, master_port={s.master_port}"))
        self._info0("train_runtime.py:160",
                    "[Primus:Runtime] Applying CLI overrides: "
                    + str({k[4:]: v for k, v in overrides.items()}),
                    f"[Primus:Runtime] Global logger initialized (rank=0, world_size={s.world})",
                    *pt.banner("Setup started."),
                    "[TrainRuntime] Loading trainer: stage=pretrain, trainer_class=MegatronPretrainTrainer")
        self._info0("print_rank_last_patches.py:88",
                    f"[Patch:megatron.training_log] ThroughputAverageExtension initialized with seq_len: {s.seq} "
                    f"world_size: {s.world} log_avg_skip_iterations: 2 log_avg_reset_interval: 50",
                    "[Patch:megatron.training_log] Wrapped training_log with Primus print_rank_last hook")
        self._node0(*mt.arguments_dump(arguments(s)), *mt.startup_lines(s.tp, s.pp),
                    mt.datetime_line("after megatron is initialized", now(), True))
        self._info0("train_runtime.py:480", *pt.banner("Setup completed."), *pt.banner("Init started."))
        self._info0("train_runtime.py:495", *pt.banner("Init completed."))

    def datasets(self) -> None:
        if self.spec.node_rank == 0:
            self.out.worker(*self._log(0, "WARNING", "gpt_dataset.py:745",
                                       "Unable to save MockGPTDataset indexes because path_to_cache is None"))
        self._node0("> finished creating GPT datasets ...",
                    mt.datetime_line("after dataloaders are built", now(), True))
        self._info0("train_runtime.py:505", "Python GC disabled for training (matching NeMo memory management)",
                    *pt.banner("Training started."))

    def iteration(self, values: mt.StepValues, avg, first_of_run: bool) -> None:
        s = self.spec
        if s.node_rank != s.last_node:
            return
        total = GPU_MEMORY_GB.get(s.gpu_name, 191.98)
        mem = pt.MemInfo(round(values.mem_fraction * total, 2), total)
        last_rank = s.world - 1
        message = pt.iteration_message(values, avg, mem, now(), s.primus_style, last_rank)
        tag = "trainer.py:2560" if s.primus_style == "legacy" else "utils.py:425"
        level = "INFO" if s.primus_style == "legacy" else "DEBUG"
        self.out.worker(*self._log(last_rank, level, tag, message))

    def finished(self, steps) -> None:
        self._node0(mt.datetime_line("after training is done", now(), True))
        self._info0("train_runtime.py:512", *pt.banner("Training completed."),
                    "Python GC re-enabled after training", *pt.banner("Cleanup started."),
                    *pt.banner("Cleanup completed."))

    def rank0(self, *lines: str) -> None:
        self._info0("checkpointing.py:512", *lines)

    def failed(self, reason: str, code: int) -> None:
        self.out.worker(*self._log(self.spec.global_rank0, "ERROR", "train_runtime.py:530",
                                   f"RuntimeError: Training execution failed: {reason}"))
