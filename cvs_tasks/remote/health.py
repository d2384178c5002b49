"""The node-side health snapshot: RDMA error counters and the kernel log, one command per node.

Taken on the node's own shell (not in the container) on the connection the run already holds,
before and after every training job; `cvs_tasks.health` parses what it prints.

Why the kernel-log window is bounded this way: ``dmesg --since`` needs util-linux 2.37 (RHEL 8
and Ubuntu 20.04 ship older) and converts wall-clock time to seconds since boot with a boot
time that drifts; printk's own stamps and ``/proc/uptime`` drift apart too (tens of seconds on
a node up for weeks). So the snapshot before the job records the newest kernel-log stamp (the
mark), and the one after prints only lines stamped later, both read from the same source with
the same clock. ``dmesg`` is tried first, then ``sudo -n dmesg`` (``kernel.dmesg_restrict``),
then ``journalctl -k -b -o short-monotonic`` (same ``[seconds]`` stamps); an empty answer
counts as not read, never as a clean log.
"""

from __future__ import annotations

import shlex
from typing import Sequence

from cvs_tasks.remote.results import NodeResult

IB_SYSFS = "/sys/class/infiniband"
MAX_KERNEL_LINES = 20000
SNAPSHOT_TIMEOUT_S = 60.0

_COUNTERS = r"""ib={ib}
if [ -d "$ib" ] && [ -n "$(ls -A "$ib" 2>/dev/null)" ]; then
  echo '@@counters sysfs'
  (cd "$ib" && grep -s -H -r . ./*/ports/*/counters ./*/ports/*/hw_counters ./*/hw_counters)
elif command -v rdma >/dev/null 2>&1; then
  echo '@@counters rdma'
  rdma statistic show 2>/dev/null
else
  echo '@@counters none'
fi
"""

_KLOG = r"""src=
if k=$(dmesg 2>/dev/null) && [ -n "$k" ]; then src=dmesg
elif k=$(sudo -n dmesg 2>/dev/null) && [ -n "$k" ]; then src='sudo dmesg'
elif k=$(journalctl -k -b -o short-monotonic --no-pager -q 2>/dev/null) && [ -n "$k" ]; then src=journalctl
fi
if [ -z "$src" ]; then
  echo "@@klog-error $( (dmesg 2>&1 >/dev/null; echo 'dmesg printed nothing') | head -n 1)"
"""

_STAMP = r"match($0, /^\[ *[0-9]+\.[0-9]+\]/)"

_MARK = (_KLOG + r"""else
  echo "@@klog $src"
  echo "@@klog-mark $(printf '%s\n' "$k" | awk '""" + _STAMP
         + r""" { t = substr($0, 2, RLENGTH - 2) } END { print t }')"
fi
""")

_WINDOW = (_KLOG + r"""else
  echo "@@klog $src"
  printf '%s\n' "$k" | awk -v s={start} '""" + _STAMP
           + r""" { if (substr($0, 2, RLENGTH - 2) + 0 > s + 0) print }' | tail -n {cap}
fi
""")


def _window_start(start: float) -> str:
    return f"{max(0.0, float(start)):.6f}"


def snapshot_command(window_start: float | None = None, *, ib_root: str = IB_SYSFS) -> str:
    """Before the job (``window_start`` None): counters, uptime and the kernel-log mark. After it:
    counters and the kernel-log lines stamped later than ``window_start`` (that node's mark, or
    its uptime when the log had no stamped line)."""
    parts = ["echo '@@cvs-health 1'", "echo \"@@uptime $(cut -d' ' -f1 /proc/uptime 2>/dev/null)\"",
             _COUNTERS.replace("{ib}", shlex.quote(ib_root))]
    if window_start is None:
        parts.append(_MARK)
    else:
        parts.append(_WINDOW.replace("{start}", shlex.quote(_window_start(window_start)))
                     .replace("{cap}", str(MAX_KERNEL_LINES)))
    parts.append("echo '@@end'")
    return "\n".join(parts)


def take_snapshots(hosts, window_starts: Sequence[float | None] | None = None, *,
                   timeout: float = SNAPSHOT_TIMEOUT_S) -> list[NodeResult]:
    """One snapshot command per node on the open connections (``hosts.run``), results in rank
    order; failures come back as results, never as exceptions. A node without a window start
    (its first snapshot failed) gets the first kind again: its counters are still read."""
    if window_starts is None:
        return hosts.run(snapshot_command(), timeout=timeout)
    return hosts.run([snapshot_command(s) for s in window_starts], timeout=timeout)
