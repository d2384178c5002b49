"""`rocm-smi` stand-in: `--showpids` lists the live simulated-trainer processes; `--showdriverversion`."""
from __future__ import annotations

import os
from pathlib import Path

MARKER = b"simtrainer"


def trainer_pids(proc: Path = Path("/proc")) -> list[tuple[int, str]]:
    """(pid, name) of every process running the simulated trainer, except this one."""
    found = []
    me = os.getpid()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(MARKER in part for part in argv[:4]) and b"rocm-smi" not in b" ".join(argv[:4]) \
                and b"rocm_smi" not in b" ".join(argv[:4]):
            found.append((int(entry.name), Path(argv[0].decode(errors="replace")).name or "python3"))
    return sorted(found)


def showpids(pids: list[tuple[int, str]]) -> list[str]:
    lines = ["", "============================ ROCm System Management Interface ============================",
             "===================================== KFD Processes ======================================"]
    if not pids:
        lines.append("No KFD PIDs currently running")
    else:
        lines.append("KFD process information:")
        lines.append("PID\tPROCESS NAME\tGPU(s)\tVRAM USED\tSDMA USED\tCU OCCUPANCY")
        for pid, name in pids:
            lines.append(f"{pid}\t{name}\t8\t182536421376\t0\tUNKNOWN")
    lines += ["==========================================================================================",
              "================================== End of ROCm SMI Log ===================================", ""]
    return lines


def main(argv: list[str]) -> int:
    if "--showpids" in argv:
        print("\n".join(showpids(trainer_pids())))
        return 0
    if "--showdriverversion" in argv:
        from .node_facts import versions

        print("\n".join(["",
                         "============================ ROCm System Management Interface ============================",
                         "====================================== Version of System Component "
                         "======================================",
                         f"Driver version: {versions()['driver']}",
                         "==========================================================================================",
                         "================================== End of ROCm SMI Log ===================================",
                         ""]))
        return 0
    print("\n".join(["", "============================ ROCm System Management Interface ============================",
                     "WARNING: simulated rocm-smi (cvs-testbed) answers only --showpids and --showdriverversion",
                     "================================== End of ROCm SMI Log ===================================", ""]))
    return 0
