"""One Slurm step for a command on every node: the bundle it reads, the records it writes (pure).

A broadcast used to be one ``srun --overlap`` step per node; at 1,024 nodes that is 1,024 job
steps per health check (Slurm's ``MaxStepCount`` is 40,000 per job). Now it is one step with a
task per node. srun hands its standard input to every task, so the harness writes one *bundle*
there: a table naming, per node, where its command and its stdin lie in the blob that follows
(identical commands and stdins are stored once; per-node ones that differ in a few characters, such
as each node's job script, as pieces of the first one: ``remote/slurm_pieces.py``). No command
travels in argv (one argument is limited to 128 KiB by Linux; the bundle is not). Each task finds
its row by ``SLURMD_NODENAME`` (Slurm orders tasks by its own node order, not by the node list
given), rebuilds its command and stdin from their pieces, runs the command with stdout and stderr
in files on the node, and then writes *records*: one line each, never longer than ``RECORD_MAX``
bytes, carrying the node's index, a kind and a base64 piece.

srun merges every task's output into its own stdout. slurmstepd forwards a task's output in
messages of at most 1,024 bytes, cut at the last newline when the line fits: a line of at most
1,024 bytes (newline included) always arrives whole, longer ones are split and interleave with
other tasks' lines (measured on Slurm 22.05 with 4 tasks x 2,000 lines: no line of <= 1,024 bytes
cut, up to 95 % of longer ones; docs/measured.md). Records stay far below that. The last record
of a task, ``x``, carries its exit status and the byte sizes of its stdout and stderr, so the
harness knows a node's output is whole before it trusts it.

Bundle: ``CVS-BUNDLE <rows:8> <table bytes:12>\\n``, then per node ``<name> <cmd pieces>
<stdin pieces|->\\n``, pieces being ``off:len[,off:len...]`` (offsets from the blob's start, the
node's payload their concatenation), then the blob.
Records: ``CVS1 <index> o|e <base64>\\n`` (a piece of stdout or stderr, in order) and
``CVS1 <index> x <exit status> <stdout bytes> <stderr bytes>\\n`` (the end).
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Sequence

from cvs_tasks.remote import slurm_pieces as sp
from cvs_tasks.remote.results import RawResult

MAGIC = b"CVS-BUNDLE"
RECORD = b"CVS1"
LINE_CHARS = 760  # base64 characters per record: with its header a record stays under RECORD_MAX
RECORD_MAX = 1024  # slurmstepd's message size: a line this long (newline included) is never cut
NO_ROW_EXIT = 97  # the task found no row for its node (the same code spread_command uses)

HEADER_FORMAT = b"%s %08d %012d\n"  # magic, rows, table bytes: a fixed width the program counts on
HEADER_BYTES = len(HEADER_FORMAT % (MAGIC, 0, 0))

# How a task finds its own command (and stdin) in the bundle on its stdin: "$d/c" (and "$in").
_FIND = r"""
d=$(mktemp -d "${TMPDIR:-/tmp}/cvs-step.XXXXXX") || { echo "cvs-tasks: no temp folder here" >&2; exit 90; }
trap 'rm -rf -- "$d"' EXIT
if [ -n "${1:-}" ]; then bound=(timeout -k 2 "$1"); else bound=(); fi  # $1: the broadcast's seconds
"${bound[@]}" cat > "$d/b" || { echo "cvs-tasks: no whole bundle on stdin${1:+ within $1 s}" >&2; exit 90; }
IFS=' ' read -r magic rows table < "$d/b"
[ "$magic" = CVS-BUNDLE ] || { echo "cvs-tasks: no bundle on stdin" >&2; exit 91; }
rows=$((10#$rows)) table=$((10#$table)) start=$((@HEADER@ + table)) i=0 found=
while [ "$i" -lt "$rows" ] && IFS=' ' read -r name cp ip; do
  if [ "$name" = "$SLURMD_NODENAME" ]; then found=1; break; fi
  i=$((i + 1))
done < <(tail -c +@SKIP@ "$d/b" | head -c "$table")
[ -n "$found" ] || { echo "cvs-tasks: no command for node $SLURMD_NODENAME" >&2; exit 97; }
take() {  # $1: pieces "off:len,...", $2: the file they make, in order
  local IFS=, p; : > "$2" || exit 90
  for p in $1; do tail -c +$((start + ${p%%:*} + 1)) "$d/b" | head -c "${p#*:}" >> "$2"; done
}
take "$cp" "$d/c"
if [ "$ip" = - ]; then in=/dev/null; else take "$ip" "$d/i"; in=$d/i; fi
rm -f -- "$d/b"
"""
# A broadcast's task: run it within what is left of the broadcast's seconds, then report its output
# and status as records. The task bounds its own waits: a broadcast whose srun was killed at its
# timeout leaves no task behind waiting on a stdin that never ends (slurmstepd keeps such a task).
_REPORT = r"""left=$(($1 - SECONDS)); [ "$left" -gt 0 ] || left=1
timeout -k 5 "$left" bash "$d/c" < "$in" > "$d/o" 2> "$d/e"
rc=$?
base64 -w @LINE@ -- "$d/o" | sed "s/^/CVS1 $i o /"
base64 -w @LINE@ -- "$d/e" | sed "s/^/CVS1 $i e /"
printf 'CVS1 %s x %s %s %s\n' "$i" "$rc" "$(stat -c %s -- "$d/o")" "$(stat -c %s -- "$d/e")"
"""
# A long-running job's task (``spread`` over many nodes): become its command, output straight to srun.
_EXEC = r"""c=$(cat -- "$d/c"); rm -rf -- "$d"; trap - EXIT
exec bash -c "$c" cvs-node < /dev/null
"""


def _filled(program: str) -> str:
    return (program.replace("@HEADER@", str(HEADER_BYTES)).replace("@SKIP@", str(HEADER_BYTES + 1))
            .replace("@LINE@", str(LINE_CHARS)))


TASK_PROGRAM = _filled(_FIND + _REPORT)
EXEC_PROGRAM = _filled(_FIND + _EXEC)


def build_bundle(names: Sequence[str], commands: Sequence[str], stdins: Sequence[bytes | None]) -> bytes:
    """The bundle for node i = ``names[i]`` running ``commands[i]`` with ``stdins[i]``."""
    if not len(names) == len(commands) == len(stdins):
        raise ValueError(f"bundle needs one command and one stdin per node ({len(names)})")
    if len(set(names)) != len(names) or any(not n or any(c.isspace() for c in n) for n in names):
        raise ValueError(f"bundle needs distinct node names without spaces, got {list(names)}")
    blob = sp.Blob()
    rows = []
    for name, command, stdin in zip(names, commands, stdins):
        code = sp.encode(blob.pieces(command.encode("utf-8"), "command"))
        into = "-" if stdin is None else sp.encode(blob.pieces(bytes(stdin), "stdin"))
        rows.append(f"{name} {code} {into}\n")
    table = "".join(rows).encode("utf-8")
    if len(names) > 10**8 - 1 or len(table) > 10**12 - 1:
        raise ValueError(f"bundle too large: {len(names)} nodes, a table of {len(table)} bytes")
    header = HEADER_FORMAT % (MAGIC, len(names), len(table))
    return header + table + bytes(blob.data)


def broadcast_command(job_id: str, names: Sequence[str], extra: Sequence[str] = (), *, step_name: str,
                      limit_s: float) -> list[str]:
    """One step, one task per node of ``names``, each running ``TASK_PROGRAM`` on the bundle.

    The step is named (``step_name``), so a broadcast that times out can find and cancel it
    (``scancel <job>.<step>``); Slurm's own time limit on it and each task's bound on its own waits
    (``limit_s``) end it even if that cancel never comes."""
    limit = max(1, math.ceil(limit_s))
    return ["srun", f"--jobid={job_id}", "--overlap", f"--nodes={len(names)}", "--ntasks-per-node=1",
            f"--nodelist={','.join(names)}", "--input=all", "--quiet", "--kill-on-bad-exit=0",
            f"--job-name={step_name}", f"--time={math.ceil(limit / 60) + 1}", *extra,
            "bash", "-c", TASK_PROGRAM, "cvs-broadcast", str(limit)]


def parse_records(output: bytes, count: int) -> tuple[list[RawResult | None], bytes]:
    """srun's merged stdout into a report per node index (None: the task never finished), plus
    any line that is no record (kept for the error message)."""
    pieces: list[dict[bytes, list[bytes]]] = [{b"o": [], b"e": []} for _ in range(count)]
    ends: dict[int, tuple[int, int, int]] = {}
    broken: dict[int, str] = {}
    stray = bytearray()
    for line in output.split(b"\n"):
        fields = line.split(b" ")
        if len(fields) < 4 or fields[0] != RECORD or not fields[1].isdigit() or int(fields[1]) >= count:
            if line:
                stray += line + b"\n"
            continue
        index, kind = int(fields[1]), fields[2]
        if kind in (b"o", b"e") and len(fields) == 4:
            pieces[index][kind].append(fields[3])
        elif kind == b"x" and len(fields) == 6 and all(_is_int(f) for f in fields[3:]):
            ends[index] = (int(fields[3]), int(fields[4]), int(fields[5]))
        else:
            broken[index] = f"a malformed record {_show(line)}"
    reports: list[RawResult | None] = []
    for index in range(count):
        if index not in ends:
            reports.append(None)
            continue
        code, out_size, err_size = ends[index]
        try:
            out = base64.b64decode(b"".join(pieces[index][b"o"]), validate=True)
            err = base64.b64decode(b"".join(pieces[index][b"e"]), validate=True)
        except (binascii.Error, ValueError):
            out, err = b"", b""
            broken.setdefault(index, "output that is not base64")
        if index not in broken and (len(out), len(err)) != (out_size, err_size):
            broken[index] = (f"{len(out)}+{len(err)} bytes of output where the task wrote "
                             f"{out_size}+{err_size}")
        if index in broken:
            reports.append(RawResult(None, out, err, f"its output arrived garbled ({broken[index]})"))
        else:
            reports.append(RawResult(code, out, err))
    return reports, bytes(stray)


def _is_int(field: bytes) -> bool:
    return field.lstrip(b"-").isdigit()


def _show(data: bytes, limit: int = 60) -> str:
    return repr(data[:limit]) + ("..." if len(data) > limit else "")
