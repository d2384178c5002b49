"""`SIM_FAULT` parsing and the real error texts each fault prints (docs/log_formats.md#error-signatures).

Spec: comma list of `name@step[:rank]` (rank = node rank, default the last node) and
`slow_node=<rank>:<factor>`. Names: nccl_timeout, oom, gpu_fault, nan, nan_loss, hang, crash, and
two that the job survives and only the node's health shows: link_errors (an RDMA link-error
counter grows) and gpu_reset (amdgpu ring-timeout and GPU-reset lines in the kernel log).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

FAULT_NAMES = ("nccl_timeout", "oom", "gpu_fault", "nan", "nan_loss", "hang", "crash", "link_errors", "gpu_reset")
LINK_ERRORS_GROWTH = 3
EXIT_TORCHRUN_CHILD_FAILED = 1
EXIT_SEGFAULT = 139


class FaultSpecError(ValueError):
    pass


@dataclass(frozen=True)
class Fault:
    name: str
    step: int
    node: int | None      # None = last node


@dataclass(frozen=True)
class FaultPlan:
    faults: tuple[Fault, ...] = ()
    slow: tuple[tuple[int, float], ...] = ()

    def at(self, step: int, node: int, nnodes: int) -> Fault | None:
        """The fault (if any) that fires on this node at this step."""
        for fault in self.faults:
            target = nnodes - 1 if fault.node is None else fault.node
            if fault.step == step and target == node:
                return fault
        return None

    def nan_loss_from(self, node: int, nnodes: int) -> int | None:
        """First step whose loss is NaN (silent `nan_loss` fault) for the printing node."""
        steps = [f.step for f in self.faults if f.name == "nan_loss"]
        return min(steps) if steps else None

    def slowdown(self, node: int) -> float:
        return max([factor for rank, factor in self.slow if rank == node] or [1.0])

    def group_slowdown(self, nnodes: int) -> float:
        """Everyone waits for the slowest node at each synchronisation."""
        return max([factor for rank, factor in self.slow if rank < nnodes] or [1.0])


def parse_faults(spec: str | None) -> FaultPlan:
    faults, slow = [], []
    for raw in (spec or "").split(","):
        item = raw.strip()
        if not item:
            continue
        if item.startswith("slow_node="):
            rank, _, factor = item[len("slow_node="):].partition(":")
            try:
                slow.append((int(rank), float(factor or "2.0")))
            except ValueError:
                raise FaultSpecError(f"SIM_FAULT: bad slow_node entry {item!r} "
                                     "(want slow_node=<rank>:<factor>)") from None
            continue
        name, at, where = item.partition("@")
        if name not in FAULT_NAMES or not at:
            raise FaultSpecError(f"SIM_FAULT: unknown entry {item!r} (known: {', '.join(FAULT_NAMES)}, slow_node=R:F)")
        step_text, _, rank_text = where.partition(":")
        try:
            faults.append(Fault(name, int(step_text), int(rank_text) if rank_text else None))
        except ValueError:
            raise FaultSpecError(f"SIM_FAULT: bad step/rank in {item!r} (want name@step[:rank])") from None
    return FaultPlan(tuple(faults), tuple(slow))


def _c10d(rank: int, now: datetime, pid: int) -> str:
    return (f"[rank{rank}]:[E{now.strftime('%m%d %H:%M:%S')}.{now.microsecond * 1000:09d} {pid} "
            "ProcessGroupNCCL.cpp:629] ")


def nccl_timeout_text(rank: int, seq: int, timeout_ms: int, ran_ms: int, now: datetime, pid: int) -> list[str]:
    p = _c10d(rank, now, pid)
    return [f"{p}[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
            f"OpType=ALLREDUCE, NumelIn=131072000, NumelOut=131072000, Timeout(ms)={timeout_ms}) ran for "
            f"{ran_ms} milliseconds before timing out.",
            f"[rank{rank}]:[E{now.strftime('%m%d %H:%M:%S')}.{now.microsecond * 1000:09d} {pid} "
            "ProcessGroupNCCL.cpp:2168] "
            f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}] failure detected by watchdog at work sequence id: {seq} "
            f"PG status: last enqueued work: {seq}, last completed work: {seq - 1}",
            f"[rank{rank}]: Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA "
            "kernels, subsequent GPU operations might run on corrupted/incomplete data.",
            f"[rank{rank}]: To avoid data inconsistency, we are taking the entire process down.",
            "terminate called after throwing an instance of 'c10::DistBackendError'",
            f"  what():  [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Process group watchdog thread terminated with "
            "exception: "
            f"[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
            f"NumelIn=131072000, NumelOut=131072000, Timeout(ms)={timeout_ms}) ran for {ran_ms} milliseconds "
            "before timing out."]


def remote_error_text(rank: int, peer: str) -> list[str]:
    return [f"[rank{rank}]: Traceback (most recent call last):",
            f'[rank{rank}]:   File "/workspace/Megatron-LM/megatron/training/training.py", line 1873, in train_step',
            f"[rank{rank}]:     torch.distributed.all_reduce(tensor, group=group)",
            f"[rank{rank}]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
            "ProcessGroupNCCL.cpp:3356, remote process exited or there was a network error, NCCL version 2.21.5",
            f"[rank{rank}]: ncclRemoteError: A call failed possibly due to a network error or a remote process "
            "exiting prematurely.",
            f"[rank{rank}]: Last error:",
            f"[rank{rank}]: NET/Socket : Connection closed by remote peer {peer}"]


def oom_text(rank: int, local_rank: int) -> list[str]:
    return [f"[rank{rank}]: Traceback (most recent call last):",
            f'[rank{rank}]:   File "/workspace/Megatron-LM/pretrain_gpt.py", line 352, in <module>',
            f"[rank{rank}]:     pretrain(",
            f"[rank{rank}]: torch.OutOfMemoryError: HIP out of memory. Tried to allocate 3.91 GiB. "
            f"GPU {local_rank} has a "
            "total capacity of 191.98 GiB of which 2.21 GiB is free. Of the allocated memory 183.40 GiB is allocated "
            "by PyTorch, and 4.02 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is "
            "large try setting PYTORCH_HIP_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
            "documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"]


def gpu_fault_text(node_id: int) -> list[str]:
    return [f"Memory access fault by GPU node-{node_id} (Agent handle: 0x55d0c3a1e2b0) on address 0x7f2a1c000000. "
            "Reason: Page not present or supervisor privilege."]


def nan_text(rank: int, host: str, local_rank: int, step: int) -> list[str]:
    """Megatron `--rerun-mode validate_results` (default since core_v0.14) on a NaN grad norm."""
    msg = "found NaN in local grad norm for bucket #0 in backward pass before data-parallel communication collective"
    return ["WARNING:megatron.core.rerun_state_machine:Result validation enabled",
            f"ERROR:megatron.core.rerun_state_machine:Unexpected result nan on rank {rank} at iteration #{step} "
            f"invocation #1 (message='{msg}')",
            "WARNING:megatron.core.rerun_state_machine:Need to rerun step to check reproducibility of initial result",
            f"ERROR:megatron.core.rerun_state_machine:Rank {rank}, node {host}, device {local_rank}, "
            f"iteration #{step}: "
            "First rerun: unexpected result is reproducible within the tolerance (nan = nan). "
            "Need to rerun on a different GPU to verify correctness!",
            "ERROR:megatron.core.rerun_state_machine:Saving a checkpoint and exiting now. Please resume the job from "
            "the checkpoint to rerun the last iteration and establish a diagnostic"]


def segfault_text(pid: int) -> list[str]:
    return ["Fatal Python error: Segmentation fault", "",
            "Current thread 0x00007f3b2d7fe640 (most recent call first):",
            '  File "/workspace/Megatron-LM/megatron/core/pipeline_parallel/schedules.py", line 412 in forward_step',
            f"/workspace/Megatron-LM/examples/llama/train_llama3.sh: line 412: {pid} Segmentation fault      "
            "(core dumped) torchrun ..."]


def child_failed_text(script: str, host: str, rank: int, local_rank: int, exitcode: int, pid: int,
                      now: datetime) -> list[str]:
    """The torch elastic agent's failure report after a worker died."""
    if exitcode < 0:
        signame = {-6: "SIGABRT", -9: "SIGKILL", -11: "SIGSEGV"}.get(exitcode, f"signal {-exitcode}")
        traceback = f"Signal {-exitcode} ({signame}) received by PID {pid}"
    else:
        traceback = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
    agent = pid - 91
    return [f"E{now.strftime('%m%d %H:%M:%S')}.{now.microsecond:06d} {agent} torch/distributed/elastic/multiprocessing/"
            f"api.py:984] failed (exitcode: {exitcode}) local_rank: {local_rank} (pid: {pid}) of binary: "
            "/usr/bin/python3",
            "Traceback (most recent call last):",
            '  File "/usr/local/bin/torchrun", line 8, in <module>',
            "    sys.exit(main())",
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            "=" * 60,
            f"{script} FAILED",
            "-" * 60,
            "Failures:",
            "  <NO_OTHER_FAILURES>",
            "-" * 60,
            "Root Cause (first observed failure):",
            "[0]:",
            f"  time      : {now.strftime('%Y-%m-%d_%H:%M:%S')}",
            f"  host      : {host}",
            f"  rank      : {rank} (local_rank: {local_rank})",
            f"  exitcode  : {exitcode} (pid: {pid})",
            "  error_file: <N/A>",
            f"  traceback : {traceback}",
            "=" * 60]


def rendezvous_timeout_text(waited_s: int, joined: int, expected: int) -> list[str]:
    return [f"torch.distributed.DistStoreError: Timed out after {waited_s} seconds waiting for clients. "
            f"{joined}/{expected} clients joined."]


def connect_failed_text(host: str, port: int, waited_s: int) -> list[str]:
    return [f"[W socket.cpp:487] [c10d] The client socket has failed to connect to [{host}]:{port} "
            "(errno: 111 - Connection refused).",
            f"torch.distributed.DistStoreError: Timed out after {waited_s} seconds waiting to connect to "
            f"[{host}]:{port}. The client socket has failed to connect to [{host}]:{port}"]


def port_in_use_text(port: int) -> list[str]:
    return [f"[W socket.cpp:464] [c10d] The server socket has failed to listen on any local network address. "
            f"port: {port}, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use",
            f"torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
            f"address. port: {port}, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use"]


def gpu_reset_kernel_text(pci: str = "0000:c1:00.0") -> list[str]:
    """What amdgpu prints when a compute ring hangs and the driver resets the GPU."""
    return ["[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring comp_1.0.0 timeout, signaled seq=3751, emitted seq=3753",
            f"amdgpu {pci}: amdgpu: GPU reset begin!",
            f"amdgpu {pci}: amdgpu: GPU reset(2) succeeded!"]
