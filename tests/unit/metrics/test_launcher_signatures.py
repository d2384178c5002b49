"""Launcher, scheduler, shell and full-disk failures (issue #27, round 3): each shape is found with
its class and hint, under the prefixes launchers add; look-alikes in clean logs are not.

Lines are written for these tests from the shapes bash, zsh, Slurm, Primus' runner, DeepSpeed and
Python print (pids, scripts, hosts and paths made up).
"""

import subprocess
import sys
from pathlib import Path

import pytest
from invoke import Context
from invoke.exceptions import Exit

from cvs_tasks.metrics import LogParser, parse_file, scan_lines
from cvs_tasks.metrics.signatures import announces_traceback, match_line, origin, root_cause, scan_text
from cvs_tasks.tasks.logs import scan as scan_task

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures" / "logs"

PREFIXES = ["", "0: ", "3: [default3]: ", "[rank3]: ", "2026-11-30T04:12:55.123456Z ", "gpu-node-07: "]

SHAPES = [
    # launcher's own error lines, any prefix shape
    ("[primus-slurm-entry][ERROR] Script not found: /workspace/Primus/examples/run_pretrain.sh",
     "launcher_error", "launcher"),
    ("[ERROR] hostfile /job/hostfile is empty", "launcher_error", "launcher"),
    ("[ERROR]: NNODES=4 but SLURM_NNODES=2", "launcher_error", "launcher"),
    ("[2026-11-30 04:12:55] [NODE-1(gpu-node-07)] [ERROR] Docker image rocm/primus:v26.5 not found",
     "launcher_error", "launcher"),
    ("[my-launch][node 3][FATAL] cannot reach the master at 10.1.2.3:1234", "launcher_error", "launcher"),
    ("(PrimusMaster  pid=81234) [20261130 04:12:55][node-0/2][ERROR]    [----launcher.py:88] : no GPUs visible",
     "launcher_error", "launcher"),
    # Slurm
    ("slurmstepd: error: execve(): /workspace/run.sh: No such file or directory", "slurm_step_error", "scheduler"),
    ("slurmstepd-gpu-node-07: error: Unable to create TMPDIR [/scratch/job/4242]: Permission denied",
     "slurm_step_error", "scheduler"),
    ("srun: error: Unable to allocate resources: Requested node configuration is not available",
     "srun_error", "scheduler"),
    ("srun: error: gpu-node-07: task 0: Exited with exit code 2", "srun_step_aborted", "scheduler"),
    # a shell's job report: bash with and without the script, padded pids, job control, zsh
    ("/workspace/launch/run_deepspeed.sh: line 131: 1948759 Killed                  deepspeed --hostfile "
     "/job/hostfile pretrain_gpt.py --deepspeed_config ds.json", "shell_job_killed", "signal"),
    ("line 42:   812 Killed                  python3 -u pretrain_gpt.py", "shell_job_killed", "signal"),
    ("bash: line 1: 55021 Killed                  torchrun --nproc_per_node 8 train.py", "shell_job_killed",
     "signal"),
    ("[1]+  Killed                  python train.py > train.log 2>&1", "shell_job_killed", "signal"),
    ("zsh: killed     python train.py", "shell_job_killed", "signal"),
    ("/opt/run.sh: line 7: 20331 Terminated              torchrun --nnodes 2 pretrain_gpt.py",
     "shell_job_terminated", "signal"),
    ("/opt/run.sh: line 7: 20331 Segmentation fault      (core dumped) python3 pretrain_gpt.py",
     "segfault", "segfault"),
    ("/opt/run.sh: line 7: 20331 Bus error               (core dumped) python3 pretrain_gpt.py",
     "segfault", "segfault"),
    ("zsh: bus error  python train.py", "segfault", "segfault"),
    ("Bus error (core dumped)", "segfault", "segfault"),
    ("/opt/run.sh: line 7: 20331 Aborted                 (core dumped) python3 pretrain_gpt.py",
     "process_aborted", "process"),
    ("run.sh: line 9: 7 Aborted python3 x.py", "process_aborted", "process"),
    # a full disk, as Python, shell tools, torch.save and NCCL say it
    ("OSError: [Errno 28] No space left on device: '/ckpt/iter_0000100/__0_0.distcp'", "disk_full", "disk"),
    ("tar: /scratch/data/shard-0012.bin: Cannot write: No space left on device", "disk_full", "disk"),
    ("RuntimeError: [enforce fail at inline_container.cc:626] . unexpected pos 4096 vs 0 PytorchStreamWriter "
     "failed writing file data/7: file write failed", "disk_full", "disk"),
    ("gpu-node-07:81234:81301 [3] NCCL WARN Error: failed to extend /dev/shm/nccl-Ab12Cd to 9637892 bytes",
     "disk_full", "disk"),
    ("OSError: [Errno 122] Disk quota exceeded: '/home/user/.cache/torch'", "disk_full", "disk"),
    ("Error: ENOSPC: no space left on device, write", "disk_full", "disk"),
    ("Error: failed to write the shard (os error 28)", "disk_full", "disk"),
]


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("line, name, cls", SHAPES)
def test_each_failure_shape_is_fatal_with_a_hint_under_any_prefix(prefix, line, name, cls):
    hits = scan_lines(["an earlier line", prefix + line])
    assert [(h.name, h.cls, h.fatal, h.line) for h in hits] == [(name, cls, True, 2)], prefix + line
    assert hits[0].hint


CLEAN = [
    "> killed stale processes: none",
    "INFO: the scheduler killed 0 jobs and terminated 0 steps today",
    "Killed processes are restarted by the elastic agent (max_restarts=3)",
    "[INFO] NNODES=2 MASTER_ADDR=10.1.2.3",
    "[2026-11-30 04:12:55] [NODE-0(gpu-node-03)] [INFO] Training started",
    "[primus-slurm-entry][INFO] Script found: /workspace/Primus/examples/run_pretrain.sh",
    "[2026-11-30 04:12:55] [NODE-0(gpu-node-03)] [WARN] HSA_NO_SCRATCH_RECLAIM not set",
    "log level ERROR is used for the console",
    "gpu-node-03:81234:81301 [3] NCCL WARN [Service thread] Connection closed by localRank 3",
    "gpu-node-03:81234:81301 [0] NCCL INFO Bootstrap : Using eth0:10.1.2.3<0>",
    "srun: error: ioctl(TIOCGWINSZ): Inappropriate ioctl for device",
    "slurmstepd: error: _is_a_lwp: open() /proc/81234/status failed: No such file or directory",
    "slurmstepd: error: couldn't chdir to `/home/u': No such file or directory: going to /tmp instead",
    "  disk usage of /ckpt: 41 % (no space problems)",
    "Aborting the eval loop early: eval_iters reached",
    "PCIe Bus Error: severity=Corrected, type=Physical Layer",
    "[20261130 04:12:55][rank-0/8][ERROR]    [---trainer.py:912] : rank 0 logs at ERROR while retrying a save",
    "Terminated workers are replaced: see --max-restarts",
    "  the job ran on line 131 of the plan: 1948759 tokens, Killed=0",
]


@pytest.mark.parametrize("line", CLEAN)
def test_look_alikes_in_clean_logs_are_not_failures(line):
    assert [h for h in scan_lines([line]) if h.fatal] == []


def parse(text: str) -> LogParser:
    parser = LogParser()
    parser.feed(text)
    parser.finish()
    return parser


def test_a_launcher_error_before_training_outranks_the_slurm_echo():
    text = ("[primus-slurm-entry][INFO] NNODES=2 GPUS_PER_NODE=8\n"
            "[primus-slurm-entry][ERROR] Script not found: /workspace/Primus/runner/primus-cli-direct.sh\n"
            "slurmstepd: error: *** STEP 4242.0 ON gpu-node-03 CANCELLED AT 2026-11-30T04:12:55 ***\n"
            "srun: error: gpu-node-03: task 0: Exited with exit code 2\n")
    cause = parse(text).root_cause
    assert (cause.name, cause.line) == ("launcher_error", 2) and "Script not found" in cause.text


def test_a_worker_exception_outranks_a_later_launcher_error():
    text = ("[rank4]: Traceback (most recent call last):\n"
            "[rank4]: FileNotFoundError: [Errno 2] No such file or directory: '/data/index.npy'\n"
            "[2026-11-30 04:12:56] [NODE-0(gpu-node-03)] [ERROR] training failed on node 0\n")
    assert parse(text).root_cause.name == "python_exception"


def test_a_full_disk_outranks_the_exception_that_reports_it():
    text = ("[rank0]: Traceback (most recent call last):\n"
            "[rank0]: OSError: [Errno 28] No space left on device: '/ckpt/iter_0000100'\n"
            "[rank0]: RuntimeError: checkpoint save failed\n")
    cause = parse(text).root_cause
    assert cause.name == "disk_full" and cause.cls == "disk" and "--shm-size" in cause.hint


# --- when a traceback is handled ------------------------------------------------------------------

def test_a_traceback_after_an_unrelated_warning_is_fatal_at_its_first_exception():
    text = ("[rank0]: WARNING:megatron.core.rerun_state_machine:Result validation enabled\n"
            "[rank0]: Traceback (most recent call last):\n"
            '[rank0]:   File "/workspace/Megatron-LM/megatron/training/training.py", line 1290, in train\n'
            "[rank0]: KeyError: 'lm loss'\n"
            "[rank0]: \n"
            "[rank0]: During handling of the above exception, another exception occurred:\n"
            "[rank0]: \n"
            "[rank0]: Traceback (most recent call last):\n"
            "[rank0]: RuntimeError: Training execution failed: 'lm loss'\n")
    parser = parse(text)
    assert (parser.root_cause.name, parser.root_cause.line) == ("python_exception", 4)


@pytest.mark.parametrize("warning, handled", [
    ("WARNING:megatron.core.utils:Failed to send the final metrics, continuing", True),
    ("[20261130 05:01:02][rank-0/8][WARNING]  [---utils.py:88] : retrying the save after an error:", True),
    ("2026-11-30 05:01:02,000 - primus.io - WARNING - exception while closing the writer, ignored", True),
    ("WARNING:megatron.core.datasets.gpt_dataset:Unable to save MockGPTDataset indexes because "
     "path_to_cache is None", False),  # says nothing failed that it handles
    ("/usr/lib/python3/dist-packages/torch/utils/checkpoint.py:87: UserWarning: failed to find an input", False),
    ("gpu-node-03:81234:81301 [3] NCCL WARN Error encountered progressing operation", False),
    ("W1130 04:12:55.123000 140021 torch/distributed/run.py:793] failed to set OMP_NUM_THREADS", False),
])
def test_only_a_warning_record_that_announces_a_failure_owns_the_next_traceback(warning, handled):
    tag = "[20261130 05:01:02][rank-0/8][ERROR]    [---utils.py:90] : " if "[rank-0/8]" in warning else ""
    text = warning + f"\n{tag}Traceback (most recent call last):\n{tag}ConnectionError: metrics endpoint gone\n"
    fatal = parse(text).fatal_errors
    assert (fatal == []) is handled
    assert announces_traceback(warning) is handled


def test_a_warning_of_another_rank_does_not_own_the_traceback():
    text = ("[rank1]: WARNING:megatron.core.utils:Failed to send the final metrics, continuing\n"
            "[rank5]: Traceback (most recent call last):\n"
            "[rank5]: ValueError: bad shard\n")
    assert [h.line for h in parse(text).fatal_errors] == [3]
    assert origin("[rank5]: ValueError: x") == ("[rank5]",) and origin("0: [default0]: x") == ("0:", "[default0]")


def test_a_handled_traceback_does_not_cover_another_ranks_exception():
    text = ("[rank1]: WARNING:root:retrying after an error\n"
            "[rank1]: Traceback (most recent call last):\n"
            "[rank1]: TimeoutError: store\n"
            "[rank6]: RuntimeError: HIP error: invalid device function\n"
            "[rank6]: ValueError: unrelated failure\n")
    parser = parse(text)
    assert [h.line for h in parser.fatal_errors] == [4, 5]


# --- the round-3 fixtures, through the pure parser, the task and the invoke CLI ----------------------

FAILING = [  # fixture, root cause, its line, a word of its text
    ("fail_launcher_script_not_found.log", "launcher_error", 2, "Script not found"),
    ("fail_shell_killed.log", "shell_job_killed", 31, "1948759 Killed"),
    ("fail_no_space.log", "disk_full", 33, "No space left on device"),
    ("fail_traceback_after_warning.log", "python_exception", 33, "KeyError: 'lm loss'"),
]


@pytest.mark.parametrize("name, cause, line, words", FAILING)
def test_each_round3_failure_log_has_its_root_cause(fixture_log, name, cause, line, words):
    found = parse_file(fixture_log(name)).root_cause
    assert (found.name, found.line) == (cause, line) and words in found.text and found.hint


@pytest.mark.parametrize("name, cause, line, words", FAILING)
def test_logs_scan_task_exits_1_naming_the_cause(fixture_log, capsys, name, cause, line, words):
    with pytest.raises(Exit) as exc:
        scan_task(Context(), str(fixture_log(name)))
    assert exc.value.code == 1 and f"{cause} at line {line}" in exc.value.message
    assert words in capsys.readouterr().out


@pytest.mark.parametrize("name, cause, line", [(n, c, ln) for n, c, ln, _ in FAILING[:2]])
def test_invoke_logs_scan_on_the_command_line(fixture_log, name, cause, line):
    done = subprocess.run([sys.executable, "-m", "invoke", "logs.scan", str(fixture_log(name))], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert f"fatal error signature in {fixture_log(name)}: {cause} at line {line}" in done.stderr


def test_the_noisy_clean_log_has_no_fatal_hit_and_completes(fixture_log):
    parser = parse_file(fixture_log("clean_noisy_launchers.log"))
    assert parser.fatal_errors == [] and parser.root_cause is None and parser.completed
    assert [(h.name, h.fatal) for h in parser.errors] == [
        ("slurm_noise", False), ("slurm_noise", False), ("nccl_warning", False)]


def test_no_clean_fixture_has_a_fatal_hit(fixture_log):
    clean = sorted(p.name for p in FIXTURES.glob("*.log") if not p.name.startswith("fail_"))
    assert len(clean) >= 13
    for name in clean:
        assert parse_file(fixture_log(name)).fatal_errors == [], name


@pytest.mark.parametrize("line, name", [
    ('[rank0]: ValueError: When using recompute_granuarlity: null must be "full"or "selective".',
     "megatron_recompute_granularity"),
    ("ValueError: When using recompute_granularity: none must be \"full\" or \"selective\".",
     "megatron_recompute_granularity"),
    ("[rank3]: AssertionError: --use-torch-fsdp2 is not supported with MCore's distributed optimizer",
     "megatron_fsdp2_distributed_optimizer"),
])
def test_megatron_argument_refusals_name_the_override_cause(line, name):
    hits = scan_text(line)
    cause = root_cause(hits)
    assert cause is not None and cause.name == name and cause.fatal
    assert "primus_overrides.md" in cause.hint


def test_the_stand_in_refusal_texts_are_the_ones_recognised(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parents[3] / "testbed" / "trainer" / "workspace"))
    from simtrainer import primus_overrides as stand_in

    assert match_line("ValueError: " + stand_in.RECOMPUTE_ERROR.format(value="null")).name \
        == "megatron_recompute_granularity"
    assert match_line("AssertionError: " + stand_in.FSDP2_DISTOPT).name == "megatron_fsdp2_distributed_optimizer"
