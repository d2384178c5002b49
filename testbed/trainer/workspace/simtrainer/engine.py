"""The simulated training loop shared by both frontends.

Per step: maybe fire a fault, sleep the simulated step time, synchronise with the other nodes,
print (last node), save a checkpoint when due. Returns the process exit code.
"""
from __future__ import annotations

import os
import signal
import socket
import sys
import time

from . import checkpoint as ckpt
from . import faults as ft
from . import megatron_text as mt
from . import node_sys as ns
from . import primus_text as pt
from . import schedule as sch
from .models import flops_per_token
from .rendezvous import CollectiveTimeout, Group, PeerGone, RendezvousError
from .spec import JobSpec
from .voices import now

PRIMUS_AVG_SKIP = 2
PRIMUS_AVG_RESET = 50


class JobFailed(Exception):
    def __init__(self, reason: str, code: int):
        super().__init__(reason)
        self.reason, self.code = reason, code


class Engine:
    def __init__(self, spec: JobSpec, voice):
        self.spec, self.voice = spec, voice
        self.group = Group(spec.nnodes, spec.node_rank, spec.master_addr, spec.master_port)
        self.fpt = flops_per_token(spec.model, spec.seq)
        self.host = socket.gethostname()
        self.printed: list[mt.StepValues] = []

    # -- helpers ---------------------------------------------------------------------------
    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def _fail(self, lines: list[str], reason: str, exitcode: int, code: int = ft.EXIT_TORCHRUN_CHILD_FAILED):
        s = self.spec
        local = s.gpus_per_node - 1 if s.node_rank == s.last_node else 0
        self.voice.raw(*lines)
        self.voice.raw(*ft.child_failed_text(self.voice.script, self.host, s.global_rank0 + local, local,
                                             exitcode, os.getpid() + 7, now()))
        self.voice.failed(reason, code)
        raise JobFailed(reason, code)

    def _collective_timeout(self, step: int, waited_s: float) -> None:
        timeout_ms = int(self.spec.nccl_timeout_s * 1000)
        lines = ft.nccl_timeout_text(self.spec.global_rank0, step + 2, timeout_ms,
                                     int(waited_s * 1000) + 81, now(), os.getpid())
        self._fail(lines, f"NCCL watchdog timeout at iteration {step}", -6)

    # -- the job ---------------------------------------------------------------------------
    def run(self) -> int:
        s = self.spec
        try:
            self._assert_layout(before_dump=True)
            self.voice.startup()
            self._assert_layout(before_dump=False)
            self._sleep(s.startup_s)
            self._join()
            start = self._resume_point()
            self.voice.datasets()
            self._loop(start)
            self.voice.finished(self.printed)
            return 0
        except JobFailed as failure:
            return failure.code
        finally:
            self.group.close()

    def _assert_layout(self, before_dump: bool) -> None:
        """Megatron's start-up assertions (validate_args, then the micro-batch calculator), then what the
        frontend found Megatron would raise (`spec.startup_errors`: before or after the dump)."""
        s = self.spec
        model_parallel = s.tp * s.pp
        if before_dump and s.world % model_parallel:
            self._fail(_assertion(f"world size ({s.world}) is not divisible by tensor parallel size ({s.tp}) "
                                  f"times pipeline parallel size ({s.pp})"), "world size assertion", 1)
        dp = s.world // model_parallel
        if not before_dump and s.global_batch % (s.micro_batch * dp):
            self._fail(_assertion(f"global batch size ({s.global_batch}) is not divisible by micro batch size "
                                  f"({s.micro_batch}) times data parallel size ({dp})"), "batch size assertion", 1)
        for error in s.startup_errors:
            if error.before_dump == before_dump:
                self._fail(_traceback(error.exception), error.reason, 1)

    def _join(self) -> None:
        s = self.spec
        try:
            self.group.join(s.rdzv_timeout_s)
        except RendezvousError as exc:
            if exc.kind == "port_in_use":
                self._fail(ft.port_in_use_text(s.master_port), "rendezvous port in use", 1)
            elif exc.kind == "connect":
                self._fail(ft.connect_failed_text(s.master_addr, s.master_port, int(exc.waited_s)),
                           "could not connect to the rendezvous", 1)
            self._fail(ft.rendezvous_timeout_text(int(exc.waited_s), exc.joined, s.nnodes),
                       "rendezvous timed out", 1)

    def _resume_point(self) -> int:
        s = self.spec
        if s.load_dir is None:
            return 1
        step = ckpt.latest(s.load_dir)
        if step is None:
            self.voice.rank0(*mt.no_checkpoint(str(s.load_dir)))
            return 1
        self.voice.rank0(mt.load_start(str(s.load_dir), step, distributed=s.nnodes > 1))
        self._sleep(0.2 * s.time_scale)
        self.voice.rank0(mt.load_done(str(s.load_dir), step, s.tp, s.pp))
        return step + 1

    def _loop(self, start: int) -> None:
        s = self.spec
        plan = s.faults
        group_slow = plan.group_slowdown(s.nnodes)
        own_slow = plan.slowdown(s.node_rank)
        nan_from = plan.nan_loss_from(s.node_rank, s.nnodes)
        window: list[tuple[float, float, float]] = []
        traffic = ns.folder()  # a real job moves data: the data counters grow, the error ones do not
        for device in ns.DEVICES:
            for name in ("port_xmit_data", "port_rcv_data"):
                ns.bump(traffic, device, "1", "counters", name, 1 << 20)
        last = min(s.train_iters, s.exit_interval) if s.exit_interval else s.train_iters
        for position, step in enumerate(range(start, last + 1), start=1):
            fault = plan.at(step, s.node_rank, s.nnodes)
            if fault is not None:
                self._fire(fault, step)
            warm = sch.WARMUP_FACTORS.get(position, 1.0)
            jitter = sch.step_time_ms(step, 1.0) / sch.WARMUP_FACTORS.get(step, 1.0)
            reported = s.step_ms * group_slow * warm * jitter
            self._sleep(s.step_ms * own_slow * warm * jitter * s.time_scale / 1000.0)
            try:
                self.group.barrier(step, s.nccl_timeout_s)
            except CollectiveTimeout as exc:
                self._collective_timeout(step, exc.waited_s)
            except PeerGone as exc:
                self._fail(ft.remote_error_text(s.global_rank0, exc.peer),
                           f"ncclRemoteError at iteration {step}", 1)
            values = self._values(step, reported, nan_from)
            avg = None
            if position > PRIMUS_AVG_SKIP:
                if (position - PRIMUS_AVG_SKIP - 1) % PRIMUS_AVG_RESET == 0:
                    window = []
                window.append((values.elapsed_ms, values.tflops, values.tokens))
                avg = pt.Averages(sum(w[0] for w in window) / len(window),
                                  sum(w[1] for w in window) / len(window),
                                  len(window) / sum(1.0 / w[2] for w in window))
            self.voice.iteration(values, avg, first_of_run=position == 1)
            self.printed.append(values)
            if self._save_due(step):
                self._save(step, values)
        if last < s.train_iters:
            self.voice.rank0(mt.datetime_line(f"exiting program at iteration {last}", now(), True))

    def _values(self, step: int, elapsed_ms: float, nan_from: int | None) -> mt.StepValues:
        s = self.spec
        tokens = sch.tokens_per_gpu(s.global_batch, s.seq, elapsed_ms, s.world)
        is_nan = nan_from is not None and step >= nan_from
        return mt.StepValues(step=step, total=s.train_iters, consumed=step * s.global_batch,
                             elapsed_ms=elapsed_ms, tflops=sch.tflops_per_gpu(tokens, self.fpt), tokens=tokens,
                             lr=sch.learning_rate_at(step, s.train_iters), global_batch=s.global_batch,
                             loss=None if is_nan else sch.loss_at(step, s.precision),
                             grad_norm=None if is_nan else sch.grad_norm_at(step),
                             mem_fraction=sch.mem_fraction(s.micro_batch, s.precision, step),
                             skipped=1 if is_nan else 0, nan_iters=1 if is_nan else 0)

    def _save_due(self, step: int) -> bool:
        s = self.spec
        if s.save_dir is None or s.save_interval <= 0 or step % s.save_interval:
            return False
        return not (step == s.train_iters and s.disable_last_saving)

    def _save(self, step: int, values: mt.StepValues) -> None:
        s = self.spec
        assert s.save_dir is not None
        self.voice.rank0(mt.save_start(step, str(s.save_dir), now()))
        payload = {"iteration": step, "loss": values.loss, "node_rank": s.node_rank,
                   "model": s.model.name, "precision": s.precision}
        ckpt.write_shard(s.save_dir, step, s.node_rank, payload)
        self._sleep(max(0.05, 3.0 * s.time_scale))
        try:
            self.group.barrier(-step, s.nccl_timeout_s)
        except CollectiveTimeout as exc:
            self._collective_timeout(step, exc.waited_s)
        except PeerGone as exc:
            self._fail(ft.remote_error_text(s.global_rank0, exc.peer), f"ncclRemoteError while saving {step}", 1)
        if s.node_rank == 0:
            ckpt.write_metadata(s.save_dir, step, s.nnodes, payload)
            ckpt.write_tracker(s.save_dir, step)
        self.voice.rank0(mt.save_done(step, str(s.save_dir), now(), s.tp, s.pp))

    def _fire(self, fault: ft.Fault, step: int) -> None:
        s = self.spec
        local = s.gpus_per_node - 1 if s.node_rank == s.last_node else 0
        rank = s.global_rank0 + local
        if fault.name == "crash":
            self.voice.raw(*ft.segfault_text(os.getpid()))
            sys.stdout.flush()
            raise JobFailed(f"segmentation fault at iteration {step}", ft.EXIT_SEGFAULT)
        if fault.name == "oom":
            self._fail(ft.oom_text(rank, local), f"HIP out of memory at iteration {step}", 1)
        if fault.name == "gpu_fault":
            self._fail(ft.gpu_fault_text(2 + local), f"GPU memory access fault at iteration {step}", -6)
        if fault.name == "nan":
            self._fail(ft.nan_text(rank, self.host, local, step), f"NaN grad norm at iteration {step}", 16)
        if fault.name == "hang":
            self._sleep(s.hang_s)
            self.voice.raw(f"[rank{rank}]:[E{now().strftime('%m%d %H:%M:%S')} ProcessGroupNCCL.cpp:1570] "
                           "[PG ID 0 PG GUID 0(default_pg) Rank 0] ProcessGroupNCCL's watchdog got stuck for "
                           f"{int(s.hang_s)} seconds without making progress in monitoring enqueued collectives.",
                           "Heartbeat monitor timed out! Process will be terminated after dumping debug info.")
            self._fail([], f"hang at iteration {step}", -6)
        if fault.name == "nccl_timeout":
            self._sleep(s.nccl_timeout_s)
            self._collective_timeout(step, s.nccl_timeout_s)
        if fault.name == "link_errors":
            ns.bump(ns.folder(), *ns.LINK_ERROR, ft.LINK_ERRORS_GROWTH)
        if fault.name == "gpu_reset":
            ns.kernel_lines(ns.folder(), ft.gpu_reset_kernel_text())


def _assertion(message: str) -> list[str]:
    return _traceback(f"AssertionError: {message}")


def _traceback(exception: str) -> list[str]:
    return ["Traceback (most recent call last):",
            '  File "/workspace/Megatron-LM/pretrain_gpt.py", line 283, in <module>',
            "    pretrain(",
            exception]


def install_signal_handlers() -> None:
    """SIGTERM ends the job like torchrun's agent does (no traceback, exit 143)."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
