"""What a run killed without tearing down leaves on the nodes, found and removed on request.

A harness that is SIGKILLed (or loses its machine) cannot run its own teardown. What it leaves:

* containers, found by their ``cvs.run_id`` / ``cvs.owner`` labels (``remote.find_leftovers``);
* with the ``host`` runtime, the job itself: each wrapper runs in its own process group whose
  id is in ``<scripts_dir>/<run_id>/<label>/node<rank>.pid``. A group counts as ours only while
  one of its live members still runs that wrapper script, so a recycled pid is never signalled;
* the per-run node folder ``<scripts_dir>/<run_id>`` holding scripts and the HF token file, taken
  only when its ``.cvs-run`` marker proves the harness made it (``jobs.nodedir``); everything else
  under ``scripts_dir`` is listed as kept, with the reason;
* the lock on a fixed ``paths.log_dir`` (``jobs.nodelock``), cleared only when stale.

``invoke cleanup`` lists (``--dry-run``) or removes them; ``invoke teardown`` of a killed
``host``-runtime run stops the run's jobs through ``stop_run_host_jobs``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from cvs_tasks import runtimes, schedulers
from cvs_tasks.jobs import nodedir, nodelock
from cvs_tasks.lifecycle.node_folders import owner_name, pid_alive, this_host
from cvs_tasks.remote import Hosts, Leftover, find_leftovers, remove_leftovers
from cvs_tasks.remote.retry import Attempt
from cvs_tasks.run.records import combo_dir

# One row per wrapper pid file: run, label, node rank, process group, alive|gone|unverified.
_SCAN_FUNCTION = (
    "cvs_scan() { local f pg d label r run n rank script state s line rest p; "
    "for f in \"$@\"; do [ -f \"$f\" ] || continue; "
    "pg=$(cat \"$f\" 2> /dev/null); case \"$pg\" in ''|*[!0-9]*|0|1) continue;; esac; "
    "d=${f%/*}; label=${d##*/}; r=${d%/*}; run=${r##*/}; n=${f##*/}; n=${n%.pid}; rank=${n#node}; "
    "script=\"$d/$n.sh\"; state=gone; "
    "for s in /proc/[0-9]*/stat; do read -r line < \"$s\" 2> /dev/null || continue; "
    "rest=${line##*) }; set -- $rest; [ \"$3\" = \"$pg\" ] && [ \"$1\" != Z ] || continue; "
    "p=${s#/proc/}; p=${p%/stat}; "
    "if tr '\\0' ' ' < \"/proc/$p/cmdline\" 2> /dev/null | grep -qF -- \"$script\"; then state=alive; break; fi; "
    "state=unverified; done; "
    "printf '%s\\t%s\\t%s\\t%s\\t%s\\n' \"$run\" \"$label\" \"$rank\" \"$pg\" \"$state\"; done; }"
)

# TERM a verified group, wait (bounded), then KILL; re-verified on the node at stop time.
_STOP_FUNCTION = (
    "cvs_verified() { local s line rest p; for s in /proc/[0-9]*/stat; do "
    "read -r line < \"$s\" 2> /dev/null || continue; rest=${line##*) }; set -- $rest; "
    "[ \"$3\" = \"$CVS_PG\" ] && [ \"$1\" != Z ] || continue; p=${s#/proc/}; p=${p%/stat}; "
    "tr '\\0' ' ' < \"/proc/$p/cmdline\" 2> /dev/null | grep -qF -- \"$CVS_SCRIPT\" && return 0; "
    "done; return 1; }; "
    "cvs_group_alive() { local s line rest; for s in /proc/[0-9]*/stat; do "
    "read -r line < \"$s\" 2> /dev/null || continue; rest=${line##*) }; set -- $rest; "
    "[ \"$3\" = \"$CVS_PG\" ] && [ \"$1\" != Z ] && return 0; done; return 1; }; "
    "cvs_stop() { CVS_PG=$1; CVS_SCRIPT=$2; cvs_verified || return 0; "
    "kill -TERM -- \"-$CVS_PG\" 2> /dev/null; local n=0; "
    "while cvs_group_alive && [ $n -lt $3 ]; do sleep 0.5; n=$((n+1)); done; "
    "cvs_group_alive && kill -KILL -- \"-$CVS_PG\" 2> /dev/null; true; }"
)


@dataclass(frozen=True)
class HostJob:
    """One ``host``-runtime wrapper found through its pid file; ``state`` alive|gone|unverified."""

    host: str
    rank: int
    run_id: str
    label: str
    node_rank: int
    pgid: int
    state: str


@dataclass(frozen=True)
class NodeFolder:
    """A folder under scripts_dir: ``reason`` says whose run it is, or why it is kept."""

    host: str
    rank: int
    path: str
    run_id: str
    reason: str = ""


@dataclass(frozen=True)
class NodeLock:
    """The lock on a fixed log folder; ``stale`` is why it may be cleared ("" while it may be in use)."""

    host: str
    rank: int
    path: str
    answer: nodelock.LockAnswer
    stale: str = ""


@dataclass
class LeftoverReport:
    """Everything found, plus the nodes that could not be asked (each error names its node)."""

    containers: list[Leftover] = field(default_factory=list)
    jobs: list[HostJob] = field(default_factory=list)
    folders: list[NodeFolder] = field(default_factory=list)
    kept: list[NodeFolder] = field(default_factory=list)
    locks: list[NodeLock] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def stale_locks(self) -> list[NodeLock]:
        return [lock for lock in self.locks if lock.stale]

    @property
    def live_jobs(self) -> list[HostJob]:
        return [j for j in self.jobs if j.state == "alive"]

    @property
    def empty(self) -> bool:
        return not (self.containers or self.live_jobs or self.folders or self.stale_locks)

    def lines(self) -> list[str]:
        out = [f"{c.host:<18} container {c.name} ({c.state}) run {c.run_id or '?'} owner {c.owner or '?'}"
               for c in self.containers]
        out += [f"{j.host:<18} job {j.run_id}/{j.label} node{j.node_rank} process group {j.pgid}"
                for j in self.live_jobs]
        out += [f"{f.host:<18} folder {f.path} ({f.reason})" for f in self.folders]
        out += [f"{lk.host:<18} stale lock {lk.path} of {lk.answer.describe()}: {lk.stale}" for lk in self.stale_locks]
        return out

    def kept_lines(self) -> list[str]:
        """What was found and is not removed, and why (a folder it cannot prove is its own, a live lock)."""
        out = [f"{f.host:<18} kept {f.path}: {f.reason}" for f in self.kept]
        return out + [f"{lk.host:<18} kept lock {lk.path}: held by {lk.answer.describe()}, which may still run"
                      for lk in self.locks if not lk.stale]


# --- pure command builders and parsers -------------------------------------------------------
def _run_glob(scripts_dir: str, run_id: str | None) -> str:
    base = shlex.quote(scripts_dir.rstrip("/") or "/")
    run = shlex.quote(combo_dir(run_id)) if run_id else "*"
    return f"{base}/{run}"


def host_jobs_command(scripts_dir: str, run_id: str | None = None) -> str:
    """List every wrapper pid file under ``scripts_dir`` (one run's, or all) with its state."""
    return f"{_SCAN_FUNCTION}; cvs_scan {_run_glob(scripts_dir, run_id)}/*/node*.pid; true"


def parse_host_jobs(host: str, rank: int, stdout: str) -> list[HostJob]:
    jobs = []
    for line in stdout.splitlines():
        fields = line.split("\t")
        if len(fields) != 5 or not fields[3].isdigit() or not fields[2].isdigit():
            continue
        jobs.append(HostJob(host, rank, fields[0], fields[1], int(fields[2]), int(fields[3]), fields[4]))
    return jobs


def stop_host_jobs_command(scripts_dir: str, jobs: list[HostJob], grace_s: float = 10.0) -> str:
    """Stop the given (alive) jobs of one node; ``true`` when there is none."""
    calls = []
    for job in jobs:
        if job.state != "alive" or job.pgid <= 1:
            continue
        script = f"{scripts_dir.rstrip('/')}/{job.run_id}/{job.label}/node{job.node_rank}.sh"
        calls.append(f"cvs_stop {job.pgid} {shlex.quote(script)} {max(1, int(grace_s * 2))}")
    if not calls:
        return "true"
    return f"{_STOP_FUNCTION}; " + "; ".join(calls) + "; true"


def sort_folders(host: str, rank: int, scripts_dir: str, stdout: str,
                 owner: str | None) -> tuple[list[NodeFolder], list[NodeFolder]]:
    """A node's scan as (folders to remove, folders kept), each with its reason."""
    take: list[NodeFolder] = []
    kept: list[NodeFolder] = []
    for entry in nodedir.parse_scan(stdout):
        verdict = nodedir.folder_verdict(entry, owner=owner)
        folder = NodeFolder(host, rank, f"{scripts_dir.rstrip('/')}/{entry.name}", entry.name, verdict.reason)
        (take if verdict.remove else kept).append(folder)
    return take, kept


# --- scanning and removing -------------------------------------------------------------------
def scan_leftovers(hosts: Hosts, *, runtime: str, run_id: str | None = None, owner: str | None = None,
                   scripts_dir: str | None = None, log_dir: str | None = None, timeout: float = 60.0,
                   this_host: str = "", pid_alive=lambda pid: True) -> LeftoverReport:
    """Containers (docker); per-run node folders that carry their marker, and the live wrapper
    groups (host) of those runs (when scripts_dir is known); the lock on a fixed log folder."""
    report = LeftoverReport()
    kind = runtimes.get(runtime)
    if kind.node_docker:
        scan = find_leftovers(hosts, owner, run_id=run_id, timeout=timeout)
        report.containers, report.errors = list(scan.found), list(scan.errors)
    if scripts_dir:
        listed = hosts.run(nodedir.scan_folders_command(scripts_dir, run_id), timeout=timeout)
        for node, r in zip(hosts.nodes, listed):
            if r.ok:
                take, kept = sort_folders(node.name, node.rank, scripts_dir, r.stdout, owner)
                report.folders += take
                report.kept += kept
            else:
                report.errors.append(r.error or f"node {node.label}: folder scan failed")
        marked = {(f.host, f.run_id) for f in report.folders}
        if kind.host_pids:
            answers = hosts.run(host_jobs_command(scripts_dir, run_id), timeout=timeout)
            for node, r in zip(hosts.nodes, answers):
                if r.ok:  # only the jobs of runs whose folder is provably the harness's
                    report.jobs += [j for j in parse_host_jobs(node.name, node.rank, r.stdout)
                                    if (j.host, j.run_id) in marked]
                else:
                    report.errors.append(r.error or f"node {node.label}: job scan failed")
    if log_dir and not nodelock.per_run(log_dir):
        for node, r in zip(hosts.nodes, hosts.run(nodelock.inspect_command(log_dir), timeout=timeout)):
            answer = nodelock.parse_answer(r.stdout) if r.ok else nodelock.LockAnswer("unknown")
            if not r.ok:
                report.errors.append(r.error or f"node {node.label}: lock scan failed")
            elif answer.state == "held":
                stale = nodelock.stale_reason(answer, this_host=this_host, pid_alive=pid_alive) or ""
                report.locks.append(NodeLock(node.name, node.rank, nodelock.lock_path(log_dir), answer, stale))
    return report


def remove_found(hosts: Hosts, report: LeftoverReport, *, scripts_dir: str | None, log_dir: str | None = None,
                 record: list[Attempt] | None = None, timeout: float = 120.0) -> list[str]:
    """Stop jobs, remove containers (retried), delete marked folders (each re-checked on the node),
    clear stale locks; returns what failed, by node."""
    problems: list[str] = []
    if report.live_jobs and scripts_dir:
        commands = [stop_host_jobs_command(scripts_dir, [j for j in report.live_jobs if j.host == name])
                    for name in hosts.names]
        problems += [r.error or f"node {r.host}: stopping jobs failed" for r in hosts.run(commands, timeout=timeout)
                     if not r.ok]
    if report.containers:
        results = remove_leftovers(hosts, report.containers, timeout=timeout, record=record)
        problems += [r.error or f"node {r.host}: docker rm failed: {r.stderr.strip()}" for r in results
                     if not r.ok and "no such container" not in (r.stderr or "").lower()]
    if report.folders and scripts_dir:
        commands = [nodedir.remove_runs_command(scripts_dir, [f.run_id for f in report.folders if f.host == name])
                    for name in hosts.names]
        problems += [r.error or f"node {r.host}: {r.stderr.strip()}" for r in hosts.run(commands, timeout=timeout)
                     if not r.ok]
    if report.stale_locks and log_dir:
        stale = {lk.host: lk for lk in report.stale_locks}
        commands = [nodelock.clear_stale_command(log_dir, stale[name].answer.text) if name in stale else "true"
                    for name in hosts.names]
        problems += [r.error or f"node {r.host}: {r.stderr.strip()}" for r in hosts.run(commands, timeout=timeout)
                     if not r.ok]
    return problems


def stop_run_host_jobs(hosts: Hosts, scripts_dir: str, run_id: str, timeout: float = 60.0) -> list[str]:
    """For teardown (``host`` runtime): stop this run's jobs a killed harness left running.

    Returns one note per stopped job; raises nothing (teardown goes on either way).
    """
    answers = hosts.run(host_jobs_command(scripts_dir, run_id), timeout=timeout)
    jobs = [j for node, r in zip(hosts.nodes, answers) if r.ok
            for j in parse_host_jobs(node.name, node.rank, r.stdout) if j.state == "alive"]
    if not jobs:
        return []
    hosts.run([stop_host_jobs_command(scripts_dir, [j for j in jobs if j.host == n]) for n in hosts.names],
              timeout=timeout)
    return [f"stopped leftover job {j.label} (process group {j.pgid}) on {j.host}" for j in jobs]


# --- the `invoke cleanup` entry point --------------------------------------------------------
@dataclass
class CleanupOutcome:
    found: LeftoverReport
    remaining: LeftoverReport | None
    problems: list[str]
    attempts: list[Attempt]

    @property
    def ok(self) -> bool:
        return not self.problems and not self.found.errors and (self.remaining is None or self.remaining.empty)


def cleanup(cluster: str, *, config: str | None = None, run: str | None = None, all_owners: bool = False,
            dry_run: bool = False, say: Callable[[str], None] = print) -> CleanupOutcome:
    """Find (and unless ``dry_run`` remove) what killed runs left on the cluster's nodes (the cluster's
    scheduler finds the nodes: the listed ones, or every allocation cvs-tasks requested and nobody released)."""
    from cvs_tasks.config import load_cluster, load_suite
    from cvs_tasks.run.rundir import check_run_flag

    check_run_flag(run)  # `--run ..` would name the parent of scripts_dir, which this removes
    cluster_obj = load_cluster(Path(cluster))
    runtime, scripts_dir, log_dir = runtimes.DEFAULT, None, None
    if config:
        suite = load_suite(Path(config), cluster_obj)
        runtime = suite.config.container.runtime.name
        scripts_dir, log_dir = suite.config.paths.scripts_dir, suite.config.paths.log_dir
    run_id = Path(run).name if run else None
    owner = None if all_owners else owner_name()
    where = dict(runtime=runtime, run_id=run_id, owner=owner, scripts_dir=scripts_dir, log_dir=log_dir,
                 this_host=this_host(), pid_alive=pid_alive)
    return schedulers.for_cluster(cluster_obj).cleanup(cluster_obj, where, dry_run=dry_run, say=say)


def clean_hosts(hosts: Hosts, where: dict, *, dry_run: bool, say: Callable[[str], None]) -> CleanupOutcome:
    """Scan ``hosts`` for what killed runs left (``where``: ``scan_leftovers``' arguments), say what
    was found and, unless ``dry_run``, remove it and scan again."""
    found = scan_leftovers(hosts, **where)
    for line in found.lines():
        say(("would remove: " if dry_run else "") + line)
    for line in found.kept_lines():
        say(line)
    for error in found.errors:
        say(f"could not scan: {error}")
    if found.empty:
        say("no leftovers found" + (f" for run {where['run_id']}" if where["run_id"] else ""))
    if dry_run or found.empty:
        return CleanupOutcome(found, None, [], [])
    attempts: list[Attempt] = []
    problems = remove_found(hosts, found, scripts_dir=where["scripts_dir"], log_dir=where["log_dir"], record=attempts)
    remaining = scan_leftovers(hosts, **where)
    for attempt in attempts:
        say(f"retried {attempt.step} (attempt {attempt.attempt}): {attempt.error}")
    for line in remaining.lines():
        say(f"still there: {line}")
    return CleanupOutcome(found, remaining, problems, attempts)
