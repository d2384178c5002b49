"""Terminations and root causes: schedulers, signals, launchers, a rank's final exception line,
and the rule that the first cause outranks what other ranks print later. Clean logs stay clean.

Lines are written for these tests in the shapes Slurm, torch elastic, DeepSpeed, Primus and
PyTorch print (prefixes included).
"""

import pytest

from cvs_tasks.metrics import LogParser, scan_lines

ITERATION = (" [2026-11-30 04:{m:02d}:00] iteration {s:8d}/      50 | consumed samples: {c:12d} | elapsed time "
             "per iteration (ms): 13800.0 | throughput per GPU (TFLOP/s/GPU): 480.0 | learning rate: 1.5E-05 | "
             "global batch size:   128 | lm loss: 9.5E+00 | loss scale: 1.0 | grad norm: 1.500 | number of "
             "skipped iterations:   0 | number of nan iterations:   0 |\n")


def iterations(n: int) -> str:
    return "".join(ITERATION.format(m=s % 60, s=s, c=s * 128) for s in range(1, n + 1))


def parse(text: str) -> LogParser:
    parser = LogParser()
    parser.feed(text)
    parser.finish()
    return parser


@pytest.mark.parametrize("line, name, cls", [
    ("slurmstepd: error: *** STEP 4242.0 ON gpu-node-03 CANCELLED AT 2026-11-30T04:12:55 DUE TO TIME LIMIT ***",
     "scheduler_time_limit", "scheduler"),
    ("slurmstepd: error: *** JOB 4242 ON gpu-node-03 CANCELLED AT 2026-11-30T04:12:55 DUE TO TIME LIMIT ***",
     "scheduler_time_limit", "scheduler"),
    ("slurmstepd: error: *** JOB 4242 ON gpu-node-03 CANCELLED AT 2026-11-30T04:12:55 DUE TO PREEMPTION ***",
     "scheduler_preempted", "scheduler"),
    ("slurmstepd: error: *** STEP 4242.0 ON gpu-node-07 CANCELLED AT 2026-11-30T04:12:55 DUE TO NODE FAILURE ***",
     "scheduler_node_failure", "scheduler"),
    ("slurmstepd: error: *** STEP 4242.0 ON gpu-node-03 CANCELLED AT 2026-11-30T04:12:55 ***",
     "scheduler_cancelled", "scheduler"),
    ("=>> PBS: job killed: walltime 7205 exceeded limit 7200", "scheduler_time_limit", "scheduler"),
    ("TERM_RUNLIMIT: job killed after reaching LSF run time limit.", "scheduler_time_limit", "scheduler"),
    ("TERM_PREEMPT: job killed after preemption.", "scheduler_preempted", "scheduler"),
    ("srun: Job step aborted: Waiting up to 32 seconds for job step to finish.", "srun_step_aborted", "scheduler"),
    ("srun: error: gpu-node-03: task 5: Exited with exit code 1", "srun_step_aborted", "scheduler"),
    ("srun: error: gpu-node-03: tasks 0-7: Killed", "srun_step_aborted", "scheduler"),
    ("W1130 04:12:55.123000 140021 torch/distributed/elastic/agent/server/api.py:704] Received 15 death signal,"
     " shutting down workers", "signal_death", "signal"),
    ("[2026-11-30 04:12:55,000] torch.distributed.elastic.agent.server.api: [WARNING] Received Signals.SIGTERM "
     "death signal, shutting down workers", "signal_death", "signal"),
    ("torch.distributed.elastic.multiprocessing.api.SignalException: Process 81234 got signal: 15",
     "signal_death", "signal"),
    ("[2026-11-30 04:12:55,100] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python3', '-u', "
     "'pretrain_gpt.py', '--local_rank=7'] exits with return code = 1", "launcher_exit", "process"),
    ("primus launcher exited with code 1", "launcher_exit", "process"),
    ("[2026-11-30 04:12:56] [NODE-0(gpu-node-03)] [ERROR] primus-cli exited with exit code 3", "launcher_exit",
     "process"),
    ("subprocess.CalledProcessError: Command '['/usr/bin/python3', '-u', 'pretrain_gpt.py']' returned non-zero "
     "exit status 1.", "launcher_exit", "process"),
    ("[2026-08-21 16:55:31] [NODE-0(n1)] [ERROR] [direct] torchrun exited with code 1", "torchrun_failed", "process"),
    ("pdsh@gpu-node-01: gpu-node-02: ssh exited with exit code 1", "launcher_exit", "process"),
    ("mpirun noticed that process rank 3 with PID 0 on node gpu-node-02 exited on signal 9 (Killed).",
     "launcher_exit", "process"),
    ("Primary job  terminated normally, but 1 process returned a non-zero exit code. Per user-direction, "
     "the job has been aborted.", "launcher_exit", "process"),
    ("slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. Some of the step tasks have been OOM Killed.",
     "host_oom", "oom"),
    ("srun: error: gpu-node-03: task 3: Out Of Memory", "host_oom", "oom"),
    ("[rank4]: FileNotFoundError: [Errno 2] No such file or directory: '/data/llama/tokenizer.model'",
     "python_exception", "exception"),
    ("0: [default3]: RuntimeError: Error(s) in loading state_dict for GPTModel:", "python_exception", "exception"),
    ("10.1.2.3: ValueError: seq_length 8192 exceeds max_position_embeddings 4096", "python_exception", "exception"),
    ("[20261130 04:12:55][rank-4/8][ERROR]    [---trainer.py:912] : KeyError: 'lm loss'", "python_exception",
     "exception"),
    ("AssertionError", "python_exception", "exception"),
])
def test_termination_signatures_are_fatal_with_a_hint(line, name, cls):
    hits = scan_lines(["some earlier line", line])
    assert [(h.name, h.cls, h.fatal, h.line) for h in hits] == [(name, cls, True, 2)]
    assert hits[0].hint


def test_a_ranks_missing_file_is_the_root_cause_not_the_later_watchdog():
    text = iterations(12) + (
        "[rank4]: Traceback (most recent call last):\n"
        '[rank4]:   File "/workspace/Megatron-LM/pretrain_gpt.py", line 289, in <module>\n'
        "[rank4]:     pretrain(\n"
        "[rank4]: FileNotFoundError: [Errno 2] No such file or directory: '/data/llama/index.npy'\n"
        "[rank0]:[E1130 04:22:55.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran "
        "for 600081 milliseconds before timing out.\n"
        "[rank1]: FileNotFoundError: [Errno 2] No such file or directory: '/data/llama/index.npy'\n"
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n")
    parser = parse(text)
    cause = parser.root_cause
    assert (cause.name, cause.line) == ("python_exception", 16)
    assert "index.npy" in cause.text
    assert parser.summary()["root_cause"]["name"] == "python_exception"
    names = [h.name for h in parser.fatal_errors]
    assert names == ["python_exception", "nccl_watchdog_timeout", "python_exception", "torchrun_child_failed"]


def test_scheduler_kill_outranks_the_echoes_it_causes():
    text = iterations(5) + (
        "W1130 04:12:55.123000 140021 torch/distributed/elastic/agent/server/api.py:704] Received 15 death "
        "signal, shutting down workers\n"
        "slurmstepd: error: *** STEP 4242.0 ON gpu-node-03 CANCELLED AT 2026-11-30T04:12:55 DUE TO TIME LIMIT ***\n"
        "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"
        "[2026-11-30 04:12:56] [NODE-0(gpu-node-03)] [ERROR] [direct] torchrun exited with code 143\n")
    cause = parse(text).root_cause
    assert cause.name == "signal_death" and cause.cls == "signal"


def test_clean_log_with_benign_shutdown_warnings_has_no_fatal_hit():
    text = iterations(50) + (
        "gpu-node-03:81234:81301 [3] NCCL INFO [Service thread] Connection closed by localRank 3\n"
        "gpu-node-03:81234:81301 [3] NCCL WARN [Service thread] Error encountered progressing operation=Connect,"
        " res=3, closing connection\n"
        "gpu-node-03:81234:81307 [3] NCCL WARN [Proxy Service 3] Failed to execute operation Close from rank 3,"
        " retcode 3\n"
        "/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:87: UserWarning: None of the inputs "
        "have requires_grad=True. Gradients will be None\n"
        "  warnings.warn(\n"
        "WARNING:megatron.core.utils:Failed to send the final metrics, continuing\n"
        "Traceback (most recent call last):\n"
        '  File "/workspace/Megatron-LM/megatron/core/utils.py", line 88, in send\n'
        "    sock.sendall(payload)\n"
        "BrokenPipeError: [Errno 32] Broken pipe\n"
        "[20261130 05:01:02][rank-0/8][WARNING]  [---trainer.py:77] : ConnectionError: metrics endpoint gone\n"
        "[after training is done] datetime: 2026-11-30 05:01:03.000000 \n")
    parser = parse(text)
    assert parser.fatal_errors == [] and not parser.summary()["fatal"]
    assert parser.completed
    assert {h.name for h in parser.errors} >= {"nccl_warning", "python_exception"}


def test_a_traceback_long_after_a_warning_is_fatal_again():
    text = ("WARNING:root:retrying\nTraceback (most recent call last):\nTimeoutError: retry\n"
            + iterations(3) + "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
            "ImportError: cannot import name 'fused_layer_norm_cuda'\n")
    fatal = parse(text).fatal_errors
    assert [(h.name, h.text) for h in fatal] == [
        ("python_exception", "ImportError: cannot import name 'fused_layer_norm_cuda'")]


def test_hits_are_capped_and_the_rest_counted():
    parser = parse("gpu-node-03:1:2 [3] NCCL WARN NET/IB : Got async event : port error\n" * 2000
                   + "[rank4]: RuntimeError: boom\n")
    assert len(parser.errors) <= 501 and parser.errors_dropped >= 1499
    assert parser.root_cause.name == "python_exception" and parser.summary()["fatal"]
