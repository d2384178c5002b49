"""The lock a run holds on each node's log folder, so two runs never write the same training logs.

A site config may fix ``paths.log_dir``; two runs on the same nodes would then write (and read)
the same ``training.log``. The first run makes ``<log_dir>/.cvs-lock/`` (``mkdir`` is atomic) and
writes ``holder`` in it (run id, owner, harness host, pid, start time); a second run finds it and
is refused, naming the holder. The same run taking it again (a later command of a chained run)
refreshes the holder. A lock is stale when its holder ran on this machine and that pid is gone,
or it is older than ``STALE_AFTER_S``; a stale one is replaced only if it still reads as it did.
Pure: command builders and parsers; the caller says which pids are alive.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Callable

from cvs_tasks.config.placeholders import RUN_ID
from cvs_tasks.identifiers import identifier_problem
from cvs_tasks.jobs.nodedir import run_id_fragment
from cvs_tasks.jobs.shell import q

LOCK = ".cvs-lock"
HOLDER = "holder"
HOLDER_MAX_BYTES = 1024
STALE_AFTER_S = 24 * 3600
TAKEN, HELD, NONE, CLEARED = "cvs-lock taken", "cvs-lock held", "cvs-lock none", "cvs-lock cleared"


@dataclass(frozen=True)
class LockHolder:
    run_id: str
    owner: str
    host: str
    pid: int
    started: int

    def to_json(self) -> str:
        return json.dumps({"host": self.host, "owner": self.owner, "pid": int(self.pid), "run_id": self.run_id,
                           "started": int(self.started)}, sort_keys=True)

    def describe(self) -> str:
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.started))
        return f"run {self.run_id} of {self.owner} (harness on {self.host}, pid {self.pid}, since {since})"


@dataclass(frozen=True)
class LockAnswer:
    """What a node said: ``state`` taken|held|none|cleared|unknown; ``age_s`` by the node's clock."""

    state: str
    age_s: int | None = None
    text: str = ""

    @property
    def holder(self) -> LockHolder | None:
        return parse_holder(self.text)

    def describe(self) -> str:
        holder = self.holder
        if holder is not None:
            return holder.describe()
        shown = self.text[:80] or "empty"
        return f"an unreadable lock (holder: {shown!r})"


def lock_path(log_dir: str) -> str:
    return f"{log_dir.rstrip('/') or ''}/{LOCK}"


def per_run(log_dir: str) -> bool:
    """Whether the log folder is already per run (holds ``{run-id}``), so no other run can share it."""
    return RUN_ID in log_dir


def parse_holder(text: str) -> LockHolder | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    run_id, owner, host, pid, started = (data.get(k) for k in ("run_id", "owner", "host", "pid", "started"))
    if identifier_problem("run id", run_id) or identifier_problem("user name", owner):
        return None
    if not isinstance(host, str) or identifier_problem("host", host):
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (pid, started)):
        return None
    return LockHolder(run_id, owner, host, pid, started)


_SHOW = (f"a=-; t=$(stat -c %Y -- \"$l\" 2> /dev/null) && a=$(( $(date +%s) - t )); "
         f"printf '{HELD} %s\\n' \"$a\"; [ -L \"$l\" ] || [ -L \"$h\" ] || [ ! -f \"$h\" ] || "
         f"head -c {HOLDER_MAX_BYTES} \"$h\" 2> /dev/null | tr -d '\\000-\\037'; echo")


def _vars(log_dir: str) -> str:
    return f"l={q(lock_path(log_dir))}; h=\"$l/{HOLDER}\""


def _ours(run_id: str) -> str:
    return (f"[ -d \"$l\" ] && [ ! -L \"$l\" ] && [ -f \"$h\" ] && [ ! -L \"$h\" ] && "
            f"grep -qF -- {q(run_id_fragment(run_id))} \"$h\"")


def take_command(log_dir: str, holder: LockHolder) -> str:
    """Take the lock (or refresh it, when this run holds it); else print who holds it.

    Answers ``cvs-lock taken``, or ``cvs-lock held <age s>`` and the holder's text on the next line."""
    text = q(holder.to_json())
    # the holder is written before the lock appears (rename of a full folder: atomic, refused when
    # one is there), so a node sharing the folder never sees a lock without its holder
    fresh = (f"t=\"$l.$$.new\"; rm -rf -- \"$t\"; "
             f"(umask 022 && mkdir \"$t\" && printf '%s\\n' {text} > \"$t/{HOLDER}\") && "
             f"mv -T -- \"$t\" \"$l\" 2> /dev/null")
    refresh = f"(umask 022 && printf '%s\\n' {text} > \"$h.$$\" && mv -f -- \"$h.$$\" \"$h\")"
    return (
        f"{_vars(log_dir)}; mkdir -p {q(log_dir)} || exit 1; "
        f"if {fresh} || {{ rm -rf -- \"$t\"; {_ours(holder.run_id)} && {refresh}; }}; then echo '{TAKEN}'; "
        f"elif [ -e \"$l\" ] || [ -L \"$l\" ]; then {_SHOW}; "
        f"else echo \"cvs-tasks: cannot create the lock $l\" >&2; exit 1; fi"
    )


def _same_as_seen(seen: str) -> str:
    return (f"[ -d \"$l\" ] && [ ! -L \"$l\" ] && {{ [ ! -e \"$h\" ] || [ -f \"$h\" ]; }} && "
            f"[ \"$(head -c {HOLDER_MAX_BYTES} \"$h\" 2> /dev/null | tr -d '\\000-\\037')\" = {q(seen)} ]")


def take_stale_command(log_dir: str, seen: str, holder: LockHolder) -> str:
    """Replace a stale lock that still reads ``seen``, then take it as ``take_command`` does."""
    return f"{_vars(log_dir)}; if {_same_as_seen(seen)}; then rm -rf -- \"$l\"; fi; {take_command(log_dir, holder)}"


def clear_stale_command(log_dir: str, seen: str) -> str:
    """For ``invoke cleanup``: remove a stale lock that still reads ``seen``; else show it again."""
    return f"{_vars(log_dir)}; if {_same_as_seen(seen)}; then rm -rf -- \"$l\" && echo '{CLEARED}'; else {_SHOW}; fi"


def inspect_command(log_dir: str) -> str:
    """Who holds the lock, without taking it."""
    return f"{_vars(log_dir)}; if [ -e \"$l\" ] || [ -L \"$l\" ]; then {_SHOW}; else echo '{NONE}'; fi"


def release_command(log_dir: str, run_id: str) -> str:
    """At teardown: remove the lock only if this run holds it (a real folder, not a link)."""
    return f"{_vars(log_dir)}; if {_ours(run_id)}; then rm -rf -- \"$l\"; fi; true"


def parse_answer(stdout: str) -> LockAnswer:
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if line.strip() in (TAKEN, NONE, CLEARED):
            return LockAnswer(line.strip().split()[-1])
        if line.startswith(HELD):
            age = line[len(HELD):].strip()
            text = lines[i + 1] if i + 1 < len(lines) else ""
            return LockAnswer("held", int(age) if age.lstrip("-").isdigit() else None, text.strip())
    return LockAnswer("unknown")


def stale_reason(answer: LockAnswer, *, this_host: str, pid_alive: Callable[[int], bool],
                 max_age_s: int = STALE_AFTER_S) -> str | None:
    """Why a held lock is stale (a sentence), or None when it may be in use."""
    if answer.age_s is not None and answer.age_s > max_age_s:
        return f"older than {max_age_s // 3600} h"
    holder = answer.holder
    if holder is not None and holder.host == this_host and not pid_alive(holder.pid):
        return f"its harness (pid {holder.pid} on {holder.host}) is gone"
    return None
