"""What a run killed without tearing down leaves on the nodes, found and removed on request.

A harness that is SIGKILLed (or loses its machine) cannot run its own teardown. What it leaves:

* containers, found by their ``cvs.run_id`` / ``cvs.owner`` labels (``remote.find_leftovers``);
* with the ``host`` runtime, the job itself: each wrapper runs in its own process group whose
  id is in ``<scripts_dir>/<run_id>/<label>/node<rank>.pid``. A group counts as ours only while
  one of its live members still runs that wrapper script, so a recycled pid is never signalled;
* the per-run node folder ``<scripts_dir>/<run_id>`` holding scripts and the HF token file.

``invoke cleanup`` lists (``--dry-run``) or removes them; ``invoke teardown`` of a killed
``host``-runtime run stops the run's jobs through ``stop_run_host_jobs``.
"""

from __future__ import annotations

import getpass
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

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
    host: str
    rank: int
    path: str


@dataclass
class LeftoverReport:
    """Everything found, plus the nodes that could not be asked (each error names its node)."""

    containers: list[Leftover] = field(default_factory=list)
    jobs: list[HostJob] = field(default_factory=list)
    folders: list[NodeFolder] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def live_jobs(self) -> list[HostJob]:
        return [j for j in self.jobs if j.state == "alive"]

    @property
    def empty(self) -> bool:
        return not (self.containers or self.live_jobs or self.folders)

    def lines(self) -> list[str]:
        out = [f"{c.host:<18} container {c.name} ({c.state}) run {c.run_id or '?'} owner {c.owner or '?'}"
               for c in self.containers]
        out += [f"{j.host:<18} job {j.run_id}/{j.label} node{j.node_rank} process group {j.pgid}"
                for j in self.live_jobs]
        out += [f"{f.host:<18} folder {f.path}" for f in self.folders]
        return out


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


def folders_command(scripts_dir: str, run_id: str | None = None, owner_only: bool = True) -> str:
    """The per-run node folders under ``scripts_dir`` (the named run's, or every run's)."""
    base = shlex.quote(scripts_dir.rstrip("/") or "/")
    if run_id:
        return f"d={base}/{shlex.quote(run_id)}; [ -d \"$d\" ] && echo \"$d\"; true"
    user = " -user \"$(id -un)\"" if owner_only else ""
    return f"[ -d {base} ] && find {base} -mindepth 1 -maxdepth 1 -type d{user} -print; true"


def remove_folders_command(paths: list[str]) -> str:
    return "rm -rf -- " + " ".join(shlex.quote(p) for p in paths) if paths else "true"


# --- scanning and removing -------------------------------------------------------------------
def owner_name() -> str:
    """The ``cvs.owner`` label this machine's runs put on their containers."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def scan_leftovers(hosts: Hosts, *, runtime: str, run_id: str | None = None, owner: str | None = None,
                   scripts_dir: str | None = None, timeout: float = 60.0) -> LeftoverReport:
    """Containers (docker), live wrapper groups (host) and per-run node folders (when scripts_dir is known)."""
    report = LeftoverReport()
    if runtime == "docker":
        scan = find_leftovers(hosts, owner, run_id=run_id, timeout=timeout)
        report.containers, report.errors = list(scan.found), list(scan.errors)
    if scripts_dir:
        if runtime in ("host", "pyxis"):
            answers = hosts.run(host_jobs_command(scripts_dir, run_id), timeout=timeout)
            for node, r in zip(hosts.nodes, answers):
                if r.ok:
                    report.jobs += parse_host_jobs(node.name, node.rank, r.stdout)
                else:
                    report.errors.append(r.error or f"node {node.label}: job scan failed")
        listed = hosts.run(folders_command(scripts_dir, run_id, owner_only=owner is not None), timeout=timeout)
        for node, r in zip(hosts.nodes, listed):
            if r.ok:
                report.folders += [NodeFolder(node.name, node.rank, p) for p in r.stdout.split("\n") if p.strip()]
            else:
                report.errors.append(r.error or f"node {node.label}: folder scan failed")
    return report


def remove_found(hosts: Hosts, report: LeftoverReport, *, scripts_dir: str | None,
                 record: list[Attempt] | None = None, timeout: float = 120.0) -> list[str]:
    """Stop jobs, remove containers (retried), then delete folders; returns what failed, by node."""
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
    if report.folders:
        commands = [remove_folders_command([f.path for f in report.folders if f.host == name]) for name in hosts.names]
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
    """Find (and unless ``dry_run`` remove) what killed runs left on the cluster's nodes."""
    from cvs_tasks.config import load_cluster, load_suite
    from cvs_tasks.remote import connect
    from cvs_tasks.run.rundir import check_run_flag

    check_run_flag(run)  # `--run ..` would name the parent of scripts_dir, which this removes
    cluster_obj = load_cluster(Path(cluster))
    runtime, scripts_dir = "docker", None
    if config:
        suite = load_suite(Path(config), cluster_obj)
        runtime = suite.config.container.runtime.name
        scripts_dir = suite.config.paths.scripts_dir
    run_id = Path(run).name if run else None
    owner = None if all_owners else owner_name()
    if cluster_obj.scheduler is not None:
        return _cleanup_allocations(cluster_obj.scheduler, runtime=runtime, run_id=run_id, owner=owner,
                                    scripts_dir=scripts_dir, dry_run=dry_run, say=say)
    with connect(cluster_obj) as hosts:
        found = scan_leftovers(hosts, runtime=runtime, run_id=run_id, owner=owner, scripts_dir=scripts_dir)
        for line in found.lines():
            say(line)
        for error in found.errors:
            say(f"could not scan: {error}")
        if found.empty:
            say("no leftovers found" + (f" for run {run_id}" if run_id else ""))
        if dry_run or found.empty:
            return CleanupOutcome(found, None, [], [])
        attempts: list[Attempt] = []
        problems = remove_found(hosts, found, scripts_dir=scripts_dir, record=attempts)
        remaining = scan_leftovers(hosts, runtime=runtime, run_id=run_id, owner=owner, scripts_dir=scripts_dir)
    for attempt in attempts:
        say(f"retried {attempt.step} (attempt {attempt.attempt}): {attempt.error}")
    for line in remaining.lines():
        say(f"still there: {line}")
    return CleanupOutcome(found, remaining, problems, attempts)


def _cleanup_allocations(spec, *, runtime: str, run_id: str | None, owner: str | None,
                         scripts_dir: str | None, dry_run: bool, say: Callable[[str], None]) -> CleanupOutcome:
    """On Slurm: every allocation cvs-tasks requested and nobody released; what runs inside it
    is removed through a step of that allocation, then the allocation is cancelled."""
    from cvs_tasks.lifecycle.allocation import leftover_allocations
    from cvs_tasks.remote.slurm import SlurmClient, SlurmHosts

    client = SlurmClient(spec.slurm_conf)
    found = LeftoverReport()
    problems: list[str] = []
    jobs = leftover_allocations(spec, owner or owner_name(), run_id)
    if not jobs:
        say("no leftover Slurm allocations" + (f" for run {run_id}" if run_id else ""))
    for job_id, name, state in jobs:
        say(f"Slurm job {job_id} ({name}): {state}" + (" — would be cancelled" if dry_run else ""))
        if dry_run:
            continue
        if state == "RUNNING":
            hosts = SlurmHosts(client, client.attach(job_id))
            inside = scan_leftovers(hosts, runtime=runtime, run_id=run_id, owner=owner, scripts_dir=scripts_dir)
            for line in inside.lines():
                say(line)
            problems += remove_found(hosts, inside, scripts_dir=scripts_dir, record=[])
        if client.release(job_id):
            say(f"cancelled Slurm job {job_id}")
        else:
            problems.append(f"could not cancel Slurm job {job_id}; run `scancel {job_id}`")
    return CleanupOutcome(found, None if dry_run else LeftoverReport(), problems, [])
