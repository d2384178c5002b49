"""The node-side follower: a small bash program started once per node per job.

It loops on the node, so the harness does nothing per poll: each turn it checks the job's
exit-status file (a builtin read), takes the log's size (one ``stat``), sends what the log gained
past its offset as data frames of at most ``frame_bytes`` (``tail -c +N | head -c L``, the same
read as ``shellcmd.read_command``; where GNU ``dd`` can buffer it, the whole frame goes out in one
write, so in one SSH packet rather than three: a quarter less harness CPU per line at scale,
docs/measured.md), and ends with an exit frame once the status is there and every
byte up to the size seen after it was sent. Idle, it sends a heartbeat every ``heartbeat_s`` so the
harness tells a quiet node from a dead follower (the first at once: the follower started). A log
smaller than the offset is an error frame.

It follows the path, not a descriptor (a restarted job writes a new file at the same path). Its
wait between turns is ``read -t`` on its standard input where the harness holds that open: a line
there (a poke) makes it look at once and answer (``P``, once per poke) after that look, and end-of-file (the harness
closed the channel or died) ends it at once instead of at its next write. Where standard input
is not the harness's (``pokeable=False``), it sleeps. Wire format: ``remote/frames.py``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

FOLLOWER_NAME = "cvs-follow"  # $0 of the program: how it shows in ps on the node

# $1 log, $2 exit-status file, $3 first offset, $4 poll seconds, $5 frame bytes,
# $6 heartbeat seconds, $7 1 = wait on stdin (pokes, EOF ends), 0 = sleep
PROGRAM = r"""
log=$1 ex=$2 off=$3 poll=$4 cap=$5 beat=$6 poke=$7 asked=0 last=$((SECONDS - beat)) whole=0
if dd iflag=fullblock status=none count=0 </dev/null 2>/dev/null; then whole=1; fi
while :; do
  code=
  if [ -s "$ex" ]; then
    IFS=' 	' read -r code _ < "$ex" || :
    case $code in ''|-|*[!0-9-]*|?*-*) code= ;; esac
  fi
  size=$(stat -c %s -- "$log" 2>/dev/null) || size=
  if [ -n "$size" ]; then
    if [ "$size" -lt "$off" ]; then
      printf 'E the log shrank to %s bytes below the read offset %s (truncated or replaced)\n' "$size" "$off"
      exit 3
    fi
    while [ "$off" -lt "$size" ]; do
      n=$((size - off))
      if [ "$n" -gt "$cap" ]; then n=$cap; fi
      if [ "$whole" = 1 ]; then
        { printf 'D %s %s\n' "$off" "$n"; tail -c +$((off + 1)) -- "$log" | head -c "$n"; printf '\n'; } |
          dd bs=$((n + 64)) iflag=fullblock status=none
      else
        printf 'D %s %s\n' "$off" "$n"
        tail -c +$((off + 1)) -- "$log" | head -c "$n"
        printf '\n'
      fi
      off=$((off + n)) last=$SECONDS
    done
  fi
  if [ -n "$code" ]; then
    printf 'X %s %s\n' "$code" "${size:--}"
    exit 0
  fi
  if [ "$asked" = 1 ]; then
    printf 'P %s\n' "${size:--}"
    last=$SECONDS
  elif [ $((SECONDS - last)) -ge "$beat" ]; then
    printf 'H %s\n' "${size:--}"
    last=$SECONDS
  fi
  asked=0
  if [ "$poke" = 1 ]; then
    read -r -t "$poll" _
    case $? in 0) asked=1 ;; 1) exit 0 ;; esac
  else
    sleep "$poll"
  fi
done
"""


@dataclass(frozen=True)
class FollowerArgs:
    """What one follower is started with."""

    log_path: str
    exit_path: str
    offset: int
    poll_s: float
    frame_bytes: int
    heartbeat_s: int
    pokeable: bool = True

    def argv(self) -> list[str]:
        """bash's argv: the program, its $0 and its seven arguments."""
        if self.offset < 0 or self.frame_bytes < 1 or self.heartbeat_s < 1 or self.poll_s <= 0:
            raise ValueError(f"bad follower arguments: {self}")
        return ["bash", "-c", PROGRAM, FOLLOWER_NAME, self.log_path, self.exit_path, str(self.offset),
                f"{self.poll_s:.3f}", str(self.frame_bytes), str(self.heartbeat_s), "1" if self.pokeable else "0"]

    def command(self) -> str:
        """The same as one shell command line (for an SSH exec request or an srun step)."""
        return "exec " + " ".join(shlex.quote(a) for a in self.argv())
