"""`amd-smi` stand-in: `version`, `list`, `static --asic` and `firmware`, with this node's versions."""
from __future__ import annotations

from .node_facts import versions


def main(argv: list[str]) -> int:
    v = versions()
    gpus = range(int(v["gpu_count"]))
    command = argv[0] if argv else "version"
    if command == "version":
        print(f"AMDSMI Tool: 25.3.0+sim | AMDSMI Library version: 25.3.0 | ROCm version: {v['rocm']} | "
              f"amdgpu version: {v['driver']} | amd_hsmp version: N/A")
    elif command == "list":
        for g in gpus:
            print(f"GPU: {g}\n    BDF: 0000:{0x05 + 0x10 * g:02x}:00.0\n    UUID: sim-{g:04d}\n    KFD_ID: {1000 + g}\n"
                  f"    NODE_ID: {g + 2}\n    PARTITION_ID: 0\n")
    elif command == "static":
        for g in gpus:
            print(f"GPU: {g}\n    ASIC:\n        MARKET_NAME: {v['gpu_model']}\n        VENDOR_ID: 0x1002\n"
                  f"        DEVICE_ID: 0x74a1\n        REV_ID: 0x00\n")
    elif command == "firmware":
        for g in gpus:
            print(f"GPU: {g}\n    FW_LIST:\n        FW 0:\n            FW_ID: CP_MEC\n"
                  f"            FW_VERSION: {v['fw_mec']}\n        FW 1:\n            FW_ID: PSP_SOSDRV\n"
                  f"            FW_VERSION: {v['fw_sos']}\n")
    else:
        print(f"amd-smi (cvs-testbed stand-in): unsupported command {command!r}")
        return 2
    return 0
