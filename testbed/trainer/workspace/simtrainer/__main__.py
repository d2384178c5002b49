"""`python3 -m simtrainer megatron <family>` | `primus <primus-cli args>` | `rocm-smi <args>`."""
from __future__ import annotations

import sys


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: python3 -m simtrainer {megatron <family>|primus <args>|rocm-smi <args>}", file=sys.stderr)
        return 2
    mode, rest = sys.argv[1], sys.argv[2:]
    if mode == "megatron":
        from .megatron_cli import main as run
    elif mode == "primus":
        from .primus_cli import main as run
    elif mode == "rocm-smi":
        from .rocm_smi import main as run
    else:
        print(f"unknown mode {mode!r}", file=sys.stderr)
        return 2
    from .faults import FaultSpecError
    try:
        return run(rest)
    except FaultSpecError as exc:
        print(f"simtrainer: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
