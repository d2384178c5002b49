"""Every catalogued failure text is found with its class; benign look-alikes are not."""

import pytest

from cvs_tasks.metrics import SIGNATURES, LogParser, parse_file, scan_lines, scan_text
from cvs_tasks.metrics.signatures import CLASSES

HITS = [
    ("[rank0]:[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective "
     "operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
     "ran for 600081 milliseconds before timing out.", "nccl_watchdog_timeout", "nccl", True),
    ("Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels",
     "nccl_operations_failed", "nccl", True),
    ("[Rank 3] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress",
     "nccl_watchdog_stuck", "nccl", True),
    ("Heartbeat monitor timed out! Process will be terminated after dumping debug info.",
     "nccl_watchdog_stuck", "nccl", True),
    ("[rank0]: Process group watchdog thread terminated with exception: NCCL error",
     "nccl_watchdog_terminated", "nccl", True),
    ("terminate called after throwing an instance of 'c10::DistBackendError'",
     "nccl_dist_backend_error", "nccl", True),
    ("[rank3]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3356, unhandled "
     "system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5", "nccl_dist_backend_error",
     "nccl", True),
    ("ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
     "prematurely.", "nccl_api_error", "nccl", True),
    ("RuntimeError: NCCL error: unhandled cuda error", "nccl_error", "nccl", True),
    ("NCCL ERROR something went wrong", "nccl_error", "nccl", True),
    ("node1:123:456 [0] NCCL WARN Call to bind failed: Address already in use", "nccl_warning", "nccl", False),
    ("mlx5: local work queue catastrophic error", "rdma_queue_catastrophic", "nccl", True),
    ("[rank5]: torch.OutOfMemoryError: HIP out of memory. Tried to allocate 3.91 GiB.", "gpu_oom", "oom", True),
    ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "gpu_oom", "oom", True),
    ("RuntimeError: HIP error: out of memory", "gpu_oom", "oom", True),
    ("NCCL WARN Cuda failure 2 'out of memory'", "gpu_oom", "oom", True),
    ("hipErrorOutOfMemory", "gpu_oom", "oom", True),
    ("slurmstepd: error: Detected 1 oom_kill event in StepId=12.0", "host_oom", "oom", True),
    ("Killed", "host_oom", "oom", True),
    ("Memory access fault by GPU node-9 (Agent handle: 0x55d0c3a1e2b0) on address 0x7f2a1c000000. "
     "Reason: Page not present or supervisor privilege.", "gpu_memory_access_fault", "gpu_fault", True),
    ("HW Exception by GPU node-4 (Agent handle: 0x1ebc04e0) reason :GPU Hang", "gpu_hw_exception",
     "gpu_fault", True),
    ("amdgpu: GPU Hang detected", "gpu_hang", "gpu_fault", True),
    ("RuntimeError: HIP error: an illegal memory access was encountered", "hip_illegal_memory_access",
     "hip", True),
    ("RuntimeError: HIP error: invalid device function", "hip_runtime_error", "hip", True),
    ("HIP kernel errors might be asynchronously reported at some other API call", "hip_async_report_notice",
     "hip", False),
    ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", "torchrun_child_failed",
     "process", True),
    ("  exitcode  : -6 (pid: 1246013)", "worker_exit_code", "process", True),
    ("E0813 08:21:22.980000 1245483 torch/distributed/elastic/multiprocessing/api.py:984] failed "
     "(exitcode: -6) local_rank: 6 (pid: 1246013) of binary: /usr/bin/python", "worker_exit_code",
     "process", True),
    ("  traceback : Signal 6 (SIGABRT) received by PID 1246013", "worker_killed_by_signal", "process", True),
    ("  exitcode  : -11 (pid: 99)", "segfault", "segfault", True),
    ("Segmentation fault (core dumped)", "segfault", "segfault", True),
    ("Fatal Python error: Segmentation fault", "segfault", "segfault", True),
    ("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.",
     "store_timeout", "rendezvous", True),
    ("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError", "rendezvous_error",
     "rendezvous", True),
    ("[W socket.cpp:663] The client socket has failed to connect to [node01]:29500",
     "store_connect_failed", "rendezvous", True),
    ("RuntimeError: Rank 5, node mi300-node02, device 5, iteration 1734: Unexpected result nan "
     "(message='found NaN in local grad norm for bucket #0 in backward pass')", "nan_in_grad_or_loss", "nan", True),
    ("ERROR:megatron.core.rerun_state_machine:Unexpected result nan on rank 3 at iteration #5 invocation #1",
     "nan_unexpected_result", "nan", True),
    ("AssertionError: Rank 1: found NaN in local grad norm in backward pass before data-parallel "
     "communication collective. Device: 1, node: n1", "nan_in_grad_or_loss", "nan", True),
    ("Saving a checkpoint and exiting now. Please resume the job from the checkpoint to rerun the last "
     "iteration and establish a diagnostic", "nan_rerun_exit", "nan", True),
    ("Exiting now. The job can be resumed from a previous checkpoint", "nan_rerun_exit", "nan", True),
    ("Rank 3, node n1, device 3, iteration #5: First rerun: unexpected result is reproducible within the "
     "tolerance (nan = nan).", "nan_rerun_diagnostic", "nan", False),
    ("RuntimeError: Training execution failed: CUDA kernel", "primus_training_failed", "process", True),
    ("[2026-08-21 16:55:31] [NODE-0(n1)] [ERROR] [direct] torchrun exited with code 1",
     "torchrun_failed", "process", True),
    ("Unable to load optimizer from checkpoint /ckpt. Specify --no-load-optim or --finetune",
     "checkpoint_load_error", "process", True),
    ("Traceback (most recent call last):", "python_traceback", "exception", False),
]

BENIGN = [
    "  check_for_nan_in_loss_and_grad .................. True",
    "NCCL_DEBUG=ERROR",
    "WARNING:megatron.core.datasets.gpt_dataset:Unable to save MockGPTDataset indexes because "
    "path_to_cache is None",
    "  exit_on_missing_checkpoint ...................... False",
    "  distributed_timeout_minutes ..................... 10",
    "node1:12:34 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE",
    "  exitcode  : 0 (pid: 12)",
    "[2026-08-21 16:55:31] [NODE-0(n1)] [INFO] [direct] torchrun finished successfully (code 0)",
    "W0902 15:10:48.626000 819010 torch/distributed/elastic/multiprocessing/api.py:900] Sending "
    "process 819100 closing signal SIGTERM",
    "  no_load_optim ................................... None",
    "> killed stale processes: none",
    " validation loss at iteration 10 | lm loss value: 9.612300E+00 | lm loss PPL: 1.4968E+04 | ",
    "Skipping rerun: result validation disabled",
    "gpu_hang_timeout set to 30",
]


@pytest.mark.parametrize("line, name, cls, fatal", HITS)
def test_signature_hit(line, name, cls, fatal):
    hits = scan_lines(["harmless line", line])
    assert [(h.name, h.cls, h.fatal, h.line) for h in hits] == [(name, cls, fatal, 2)]
    assert scan_text("harmless line\n" + line + "\n") == hits


@pytest.mark.parametrize("line", BENIGN)
def test_benign_near_miss(line):
    assert scan_lines([line]) == []
    assert scan_text(line + "\n") == []


def test_matching_is_case_insensitive_and_ignores_ansi():
    hits = scan_lines(["\x1b[31mtorch.OutOfMemoryError: hip OUT OF MEMORY\x1b[0m"])
    assert [h.name for h in hits] == ["gpu_oom"]
    assert "\x1b" not in hits[0].text


def test_catalogue_is_well_formed():
    assert len({s.name for s in SIGNATURES}) == len(SIGNATURES)
    for sig in SIGNATURES:
        assert sig.cls in CLASSES and sig.anchors
        assert all(a == a.lower() for a in sig.anchors)


@pytest.mark.parametrize("line, name, cls, fatal", HITS)
def test_every_hit_line_holds_an_anchor_of_its_signature(line, name, cls, fatal):
    sig = next(s for s in SIGNATURES if s.name == name)
    assert any(a in line.lower() for a in sig.anchors)


@pytest.mark.parametrize("name, expected", [
    ("fail_nccl_timeout.log", [("nccl_watchdog_timeout", 30), ("nccl_operations_failed", 31)]),
    ("fail_oom.log", [("gpu_oom", 30)]),
    ("fail_gpu_fault.log", [("gpu_memory_access_fault", 30), ("process_aborted", 31)]),
    ("fail_nan_rerun.log", [("nan_in_grad_or_loss", 30)]),
    ("fail_child_failed.log", [("torchrun_child_failed", 30), ("worker_exit_code", 38),
                               ("worker_killed_by_signal", 40)]),
    ("fail_nan_iteration.log", [("nan_iterations", 25), ("lm_loss_missing", 26)]),
])
def test_failing_logs_report_their_signatures_with_line_numbers(fixture_log, name, expected):
    parser = parse_file(fixture_log(name))
    assert [(e.name, e.line) for e in parser.errors] == expected
    lines = fixture_log(name).read_text().splitlines()
    for e in parser.errors:
        assert lines[e.line - 1].strip()[:40] in e.text or e.text.strip()[:40] in lines[e.line - 1]


def test_iteration_line_nan_signs():
    base = (" [2026-01-01 00:00:00] iteration {s:8d}/      20 | consumed samples: 1 | elapsed time per "
            "iteration (ms): 100.0 | learning rate: 1.0E-05 | global batch size:   128 |{loss} loss "
            "scale: 1.0 | grad norm: {gn} | number of skipped iterations: {sk:3d} | number of nan "
            "iterations: {nan:3d} |\n")
    ok = " lm loss: 1.000000E+01 |"
    text = (base.format(s=1, loss=ok, gn="1.0", sk=0, nan=0)
            + base.format(s=2, loss=ok, gn="nan", sk=0, nan=0)
            + base.format(s=3, loss=" lm loss: inf |", gn="1.0", sk=0, nan=0)
            + base.format(s=4, loss="", gn="1.0", sk=0, nan=0)
            + base.format(s=5, loss=ok, gn="1.0", sk=1, nan=0)
            + base.format(s=6, loss=ok, gn="1.0", sk=0, nan=0))
    parser = LogParser()
    parser.feed(text)
    assert [(e.name, e.line, e.fatal) for e in parser.errors] == [
        ("grad_norm_not_finite", 2, True), ("lm_loss_not_finite", 3, True),
        ("lm_loss_missing", 4, True), ("skipped_iterations", 5, False)]
    assert parser.new_errors() == parser.errors and parser.new_errors() == []


def test_missing_loss_before_any_loss_is_not_flagged():
    line = (" [2026-01-01 00:00:00] iteration        1/      20 | consumed samples: 1 | elapsed time per "
            "iteration (ms): 100.0 | global batch size:   128 | loss scale: 1.0 | number of skipped "
            "iterations:   0 | number of nan iterations:   0 |\n")
    parser = LogParser()
    parser.feed(line)
    assert parser.errors == [] and parser.iterations[1].loss is None
