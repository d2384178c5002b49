"""GPU process listing/killing and stopping a job (docs/reference_suite.md#gpu-process-clean-up,
without fixed sleeps)."""

from __future__ import annotations

from jobs_factory import make_job

from cvs_tasks.jobs import build_launch, gpu_pids_command, kill_pids_command, parse_showpids, stop_job_command

SHOWPIDS_BUSY = """\

============================ ROCm System Management Interface ============================
===================================== KFD Processes ======================================
KFD process information:
PID\tPROCESS NAME\tGPU(s)\tVRAM USED\tSDMA USED\tCU OCCUPANCY
41877\tpython3\t8\t12884901888\t0\t0
41878\tpython3\t8\t12884901888\t0\t0
41877\tpython3\t8\t12884901888\t0\t0
==========================================================================================
================================== End of ROCm SMI Log ===================================
"""
SHOWPIDS_IDLE = """\
============================ ROCm System Management Interface ============================
===================================== KFD Processes ======================================
No KFD PIDs currently running
==========================================================================================
================================== End of ROCm SMI Log ===================================
"""


def test_pids_command_tolerates_a_missing_tool():
    assert gpu_pids_command() == (
        "if command -v rocm-smi > /dev/null 2>&1; then rocm-smi --showpids; "
        "else echo 'cvs-tasks: rocm-smi not found; GPU process check skipped' >&2; fi"
    )
    assert gpu_pids_command(None) == gpu_pids_command("  ")
    assert gpu_pids_command("amd-smi process --csv") == (
        "if command -v amd-smi > /dev/null 2>&1; then amd-smi process --csv; "
        "else echo 'cvs-tasks: amd-smi not found; GPU process check skipped' >&2; fi"
    )


def test_parse_showpids_table_dedups_in_order():
    assert parse_showpids(SHOWPIDS_BUSY) == [41877, 41878]


def test_parse_showpids_idle_and_empty():
    assert parse_showpids(SHOWPIDS_IDLE) == []
    assert parse_showpids("") == []


def test_parse_showpids_never_returns_init_or_zero():
    assert parse_showpids("0\tx\n1\tinit\n77\tpython3\n") == [77]


def test_kill_command_waits_bounded_for_the_pids():
    assert kill_pids_command([41877, 41878], wait_s=20) == (
        'cvs_any_alive() { local p s; for p in "$@"; do read -r s < "/proc/$p/stat" 2> /dev/null '
        '|| continue; s=${s##*) }; [ "${s%% *}" != Z ] && return 0; done; return 1; }; '
        "kill -9 41877 41878 2> /dev/null; n=0; "
        "while cvs_any_alive 41877 41878 && [ $n -lt 20 ]; do sleep 1; n=$((n+1)); done; true"
    )


def test_kill_command_with_nothing_to_kill_is_a_no_op():
    assert kill_pids_command([]) == "true"
    assert kill_pids_command([0, 1]) == "true"


def test_stop_command_terms_the_group_then_kills_within_the_grace():
    node = build_launch(make_job()).nodes[0]
    pid = node.pid_path
    assert stop_job_command(node, grace_s=15) == (
        'cvs_group_alive() { local f s; for f in /proc/[0-9]*/stat; do read -r s < "$f" 2> /dev/null '
        '|| continue; s=${s##*) }; set -- $s; [ "$3" = "$CVS_PG" ] && [ "$1" != Z ] && return 0; '
        "done; return 1; }; "
        f"CVS_PG=$(cat {pid} 2> /dev/null); "
        'case "$CVS_PG" in ""|*[!0-9]*|0|1) '
        f"echo 'cvs-tasks: no job pid in {pid}; nothing to stop' >&2;; "
        '*) if cvs_group_alive; then kill -TERM -- "-$CVS_PG" 2> /dev/null; n=0; '
        "while cvs_group_alive && [ $n -lt 15 ]; do sleep 1; n=$((n+1)); done; "
        'cvs_group_alive && kill -KILL -- "-$CVS_PG" 2> /dev/null; fi;; esac; true'
    )
