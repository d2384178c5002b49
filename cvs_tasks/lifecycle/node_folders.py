"""The run's folder and log-folder lock on every node: made at launch, held by each job, released
at teardown (commands from ``jobs.nodedir`` / ``jobs.nodelock``, run through the session's hosts).

The folder, its ``.cvs-run`` marker and the lock are one round trip. A lock another live run holds
refuses this run as an infrastructure failure (exit 3): the nodes are busy, nothing in the files
is wrong, and the same command works once that run ends. A stale lock (its harness gone from this
machine, or older than a day) is taken over, and the console says whose it was.
"""

from __future__ import annotations

import getpass
import os
import socket
import time
from typing import TYPE_CHECKING

from cvs_tasks.config.placeholders import RUN_ID
from cvs_tasks.errors import InfraError
from cvs_tasks.identifiers import identifier_problem
from cvs_tasks.jobs import nodedir, nodelock

if TYPE_CHECKING:
    from cvs_tasks.lifecycle.session import Session


def this_host() -> str:
    """This machine's name as markers and lock holders record it ("unknown" if it is not a host name)."""
    name = socket.gethostname()
    return "unknown" if identifier_problem("host", name) else name


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs on this machine (one we may not signal counts as running)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owner_name() -> str:
    """The user this machine's runs act for: the ``cvs.owner`` label of their containers."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def _owner_name() -> str:
    owner = owner_name()
    return "unknown" if identifier_problem("user name", owner) else owner


def run_marker(session: Session) -> nodedir.RunMarker:
    return nodedir.RunMarker(session.run.run_id, _owner_name(), this_host(), int(time.time()))


def lock_holder(session: Session) -> nodelock.LockHolder:
    return nodelock.LockHolder(session.run.run_id, _owner_name(), this_host(), os.getpid(), int(time.time()))


def prepare_run_folder(session: Session) -> None:
    """Create the per-run node folder with its marker and take the log-folder lock, in one command."""
    create = nodedir.create_folder_command(session.node_run_dir, run_marker(session))
    hold_lock(session, create, session.node_run_dir)


def hold_lock(session: Session, before: str | None, what: str) -> None:
    """Run ``before`` (folder creation) and then take (or refresh) the lock on every node.

    Raises InfraError naming the node and, for a busy log folder, the run that holds it."""
    hosts, log_dir, holder = session.hosts(), session.node_log_dir, lock_holder(session)
    take = nodelock.take_command(log_dir, holder)
    hosts.answer(take, nodelock.TAKEN)
    results = hosts.run(f"({before}) && {{ {take}; }}" if before else take, timeout=120)
    bad = [r for r in results if not r.ok]
    if bad:
        detail = bad[0].error or session.redactor(bad[0].stderr or bad[0].stdout).strip()[-300:]  # masked, then cut
        raise InfraError(f"could not prepare {what} on node {bad[0].host}: {detail}")
    answers = [nodelock.parse_answer(r.stdout) for r in results]
    stale = {i: nodelock.stale_reason(a, this_host=this_host(), pid_alive=pid_alive)
             for i, a in enumerate(answers) if a.state == "held"}
    if any(stale.values()):
        retry = [nodelock.take_stale_command(log_dir, answers[i].text, holder) if stale.get(i) else "true"
                 for i in range(len(answers))]
        for i, r in enumerate(hosts.run(retry, timeout=60)):
            if stale.get(i):
                session.say(f"warning: took over the stale lock of {answers[i].describe()} on {r.host}: {stale[i]}",
                            "warning")
                answers[i] = nodelock.parse_answer(r.stdout) if r.ok else nodelock.LockAnswer("unknown")
    for r, answer in zip(results, answers):
        if answer.state == "held":
            raise InfraError(busy_message(log_dir, r.host, answer))
        if answer.state != "taken":
            raise InfraError(f"node {r.host} did not answer the lock on {nodelock.lock_path(log_dir)}: "
                             f"{session.redactor(r.stdout or r.stderr).strip()[-200:] or 'no output'}")


def busy_message(log_dir: str, host: str, answer: nodelock.LockAnswer) -> str:
    return (f"log folder {log_dir} on node {host} is in use by {answer.describe()}: two runs must not write "
            f"the same training logs. Wait for that run to end, or make paths.log_dir per run (e.g. "
            f"'{log_dir.rstrip('/')}/{RUN_ID}'); if that run is gone, `invoke cleanup --config "
            f"<this config> --cluster <cluster>` clears a stale lock ({nodelock.lock_path(log_dir)})")


def release_command(session: Session) -> str:
    """Teardown, one command per node: release this run's lock, remove its marked folder."""
    return (f"{nodelock.release_command(session.node_log_dir, session.run.run_id)}; "
            f"{nodedir.remove_runs_command(session.config.paths.scripts_dir, [session.run.run_id])}")
