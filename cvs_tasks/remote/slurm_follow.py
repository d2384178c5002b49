"""Slurm's log followers: one step with a task per node, started once per job, read as one pipe.

Each task runs the shared follower program (``remote/follower.py``) for its node; srun merges the
tasks' output into its one stdout, so every line of it is a record no longer than slurmstepd's
1,024-byte message (``remote/slurm_broadcast.py`` explains why such lines never interleave):

* ``CVSF <row> h <header>``: a frame header line as the follower wrote it (``D``, ``X``, ``H``,
  ``P``, ``E``; ``remote/frames.py``);
* ``CVSF <row> d <base64>``: the next piece of the current data frame's payload;
* ``CVSF <row> end <status>``: the follower ended with that exit status.

``RecordDemux`` turns the merged lines back into each node's own frame stream, byte for byte, and
the ``FrameDecoder`` of ``remote/streams.py`` reads it as it reads an SSH channel. srun hands its
standard input to every task: the harness first writes the table of what each node follows (the
paths travel there, not in argv, so 1,024 nodes fit), then pokes are newlines every follower reads.
A node's lost follower is restarted alone: one ``srun --overlap`` step on that node, same program.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Sequence

from cvs_tasks.remote.follower import PROGRAM, FollowerArgs

RECORD = b"CVSF"
LINE_CHARS = 760  # base64 characters per payload record (a multiple of 4: each piece decodes alone)
MAX_LINE = 4096  # a longer line without its newline is not a record
TABLE_MAGIC = "CVS-FOLLOW"

# $1 the follower program, $2 poll seconds, $3 frame bytes, $4 heartbeat seconds.
# stdin: "CVS-FOLLOW <rows>\n", then per row "<node> <offset> <base64 log path> <base64 exit path>\n",
# then the harness's pokes. bash reads a pipe a byte at a time, so the table is taken exactly and
# what follows is left for the follower; head -c takes exactly a payload's length from the frames.
WRAPPER = r"""
export LC_ALL=C
IFS=' ' read -r magic rows || exit 91
[ "$magic" = CVS-FOLLOW ] || { echo "cvs-tasks: no follow table on stdin" >&2; exit 91; }
i=0 row=
while [ "$i" -lt "$rows" ]; do
  IFS=' ' read -r name off lb eb || exit 91
  if [ "$name" = "$SLURMD_NODENAME" ]; then row=$i o=$off l=$lb e=$eb; fi
  i=$((i + 1))
done
[ -n "$row" ] || { echo "cvs-tasks: nothing to follow on node $SLURMD_NODENAME" >&2; exit 97; }
log=$(printf %s "$l" | base64 -d) ex=$(printf %s "$e" | base64 -d)
bash -c "$1" cvs-follow "$log" "$ex" "$o" "$2" "$3" "$4" 1 | {
  while IFS= read -r h; do
    printf 'CVSF %s h %s\n' "$row" "$h"
    case $h in
      "D "*) head -c "${h##* }" | base64 -w @LINE@ | sed "s/^/CVSF $row d /"; IFS= read -r _ ;;
    esac
  done
}
printf 'CVSF %s end %s\n' "$row" "${PIPESTATUS[0]}"
""".replace("@LINE@", str(LINE_CHARS))


def follow_table(names: Sequence[str], args: Sequence[FollowerArgs]) -> bytes:
    """What srun's stdin carries first: which log, exit file and offset each node follows."""
    if len(names) != len(args) or len(set(names)) != len(names):
        raise ValueError(f"follow table needs one distinct node per follower ({len(names)}, {len(args)})")
    rows = [f"{name} {a.offset} {_b64(a.log_path)} {_b64(a.exit_path)}\n" for name, a in zip(names, args)]
    return (f"{TABLE_MAGIC} {len(rows)}\n" + "".join(rows)).encode("ascii")


def follow_command(job_id: str, names: Sequence[str], args: FollowerArgs, extra: Sequence[str] = ()) -> list[str]:
    """One step, a task per node of ``names``, each following its row of the table (``args`` gives the
    settings every follower shares: poll, frame size, heartbeat)."""
    args.argv()  # refuses settings the follower cannot take
    return ["srun", f"--jobid={job_id}", "--overlap", f"--nodes={len(names)}", "--ntasks-per-node=1",
            f"--nodelist={','.join(names)}", "--input=all", "--quiet", "--kill-on-bad-exit=0", *extra,
            "bash", "-c", WRAPPER, "cvs-follow-slurm", PROGRAM, f"{args.poll_s:.3f}", str(args.frame_bytes),
            str(args.heartbeat_s)]


@dataclass
class _Row:
    remaining: int = -1  # payload bytes still due for the current data frame (-1: none)
    out: bytearray = field(default_factory=bytearray)
    ended: int | None = None  # the follower's exit status once its end record came
    broken: str | None = None


class RecordDemux:
    """srun's merged stdout, in arbitrary pieces, into each row's own frame stream (pure)."""

    def __init__(self, rows: int):
        self.rows = [_Row() for _ in range(rows)]
        self._buf = bytearray()
        self.stray = b""  # the last line that was no record (for an error message)

    def feed(self, chunk: bytes) -> tuple[set[int], list[int]]:
        """Take ``chunk``; the rows that got something (bytes, an end, a break) and, per poke answer
        (a ``P`` header), its row."""
        self._buf += chunk
        touched: set[int] = set()
        answers: list[int] = []
        while True:
            end = self._buf.find(b"\n")
            if end < 0:
                if len(self._buf) > MAX_LINE:
                    self.stray, self._buf = bytes(self._buf[:200]), bytearray()
                return touched, answers
            line = bytes(self._buf[:end])
            del self._buf[:end + 1]
            row = self._take(line, answers)
            if row is not None:
                touched.add(row)

    def take_out(self, row: int) -> bytes:
        data = bytes(self.rows[row].out)
        self.rows[row].out.clear()
        return data

    def _take(self, line: bytes, answers: list[int]) -> int | None:
        tag, _, rest = line.partition(b" ")
        number, _, rest = rest.partition(b" ")
        kind, _, body = rest.partition(b" ")
        if tag != RECORD or not number.isdigit() or int(number) >= len(self.rows):
            if line:
                self.stray = line[:200]
            return None
        index = int(number)
        row = self.rows[index]
        if row.ended is not None or row.broken:
            return None
        if kind == b"h":
            row.out += body + b"\n"
            if body.startswith(b"D "):
                size = body.rsplit(b" ", 1)[-1]
                row.remaining = int(size) if size.isdigit() else -1
                if row.remaining == 0:
                    row.out += b"\n"
            elif body.startswith(b"P "):
                answers.append(index)
        elif kind == b"d":
            try:
                data = base64.b64decode(body, validate=True)
            except (binascii.Error, ValueError):
                row.broken = f"a payload record that is not base64 ({body[:40]!r})"
                return index
            row.out += data
            row.remaining -= len(data)
            if row.remaining == 0:
                row.out += b"\n"  # the payload's terminator, as the follower wrote it
        elif kind == b"end" and body.lstrip(b"-").isdigit():
            row.ended = int(body)
        else:
            row.broken = f"a malformed record {line[:60]!r}"
        return index


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")
