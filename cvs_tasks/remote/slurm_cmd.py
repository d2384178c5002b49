"""Pure Slurm command builders and output parsers; what they return is exactly what runs.

The harness talks to Slurm through its client commands (``salloc``, ``srun``, ``scontrol``,
``scancel``, ``sinfo``) on the machine it runs on, as a user at a login node would: no library
that must match the cluster's libslurm. Parsers take the commands' text and return plain values.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from cvs_tasks.remote import slurm_broadcast as sb

# Node states in which Slurm will not (or should not) run a new job step.
UNUSABLE_STATES = ("DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "MAINT", "NOT_RESPONDING",
                   "POWERED_DOWN", "POWERING_DOWN", "REBOOT", "UNKNOWN", "FUTURE", "INVALID")
# Job states after which the allocation is gone.
ENDED_JOB_STATES = ("BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
                    "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT")


@dataclass(frozen=True)
class AllocationRequest:
    """What ``salloc`` is asked for; every field but ``nodes`` optional, as on the command line."""

    nodes: int
    job_name: str
    partition: str | None = None
    account: str | None = None
    time: str | None = None
    reservation: str | None = None
    nodelist: str | None = None
    exclude: str | None = None
    wait_s: int = 300


def salloc_command(req: AllocationRequest) -> list[str]:
    """``salloc --no-shell``: the allocation outlives the command; ``--immediate`` bounds the wait."""
    cmd = ["salloc", "--no-shell", f"--nodes={req.nodes}", "--ntasks-per-node=1", "--exclusive",
           f"--job-name={req.job_name}", f"--immediate={max(1, int(req.wait_s))}"]
    for flag, value in (("--partition", req.partition), ("--account", req.account), ("--time", req.time),
                        ("--reservation", req.reservation), ("--nodelist", req.nodelist),
                        ("--exclude", req.exclude)):
        if value:
            cmd.append(f"{flag}={value}")
    return cmd


_GRANTED = re.compile(r"Granted job allocation (\d+)")
_JOB_ID = re.compile(r"\bjob (?:allocation )?(\d+)\b", re.I)


def parse_salloc(output: str) -> tuple[str | None, str | None]:
    """(job id, None) when granted, else (job id or None, the reason Slurm gave)."""
    granted = _GRANTED.search(output)
    if granted:
        return granted.group(1), None
    seen = _JOB_ID.search(output)
    reasons = [line.split("error:", 1)[1].strip() for line in output.splitlines() if "error:" in line]
    reason = "; ".join(dict.fromkeys(r for r in reasons if r)) or (output.strip().splitlines() or ["no output"])[-1]
    return (seen.group(1) if seen else None), reason


def step_command(job_id: str, node: str, command: str, extra: Sequence[str] = ()) -> list[str]:
    """One task on one node of the allocation, next to whatever else runs there (``--overlap``).

    ``extra``: more srun options, e.g. pyxis's ``--container-*`` to run the step in a container."""
    return ["srun", f"--jobid={job_id}", "--overlap", "--nodes=1", "--ntasks=1", f"--nodelist={node}",
            "--quiet", "--kill-on-bad-exit=0", *extra, "bash", "-c", command]


def enroot_uri(image: str) -> str:
    """A docker image name as pyxis/enroot wants it: ``registry#repo:tag`` when a registry is named.

    ``rocm/megatron-lm:v25.9`` stays as it is (Docker Hub); ``registry.example.com:5000/team/img:1``
    becomes ``registry.example.com:5000#team/img:1``.
    """
    first, sep, rest = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return image


def pyxis_mounts(volumes: Sequence[str]) -> str:
    """docker ``-v`` volumes (``src:dst[:opt,opt]``) as one ``--container-mounts`` value (flags joined by ``+``)."""
    mounts = []
    for volume in volumes:
        src, dst, *opts = volume.split(":")
        if "," in src or "," in dst:
            raise ValueError(f"volume {volume!r}: pyxis cannot mount a path with a comma")
        mounts.append(":".join([src, dst, *(o.replace(",", "+") for o in opts)]))
    return ",".join(mounts)


def pyxis_args(name: str, volumes: Sequence[str], *, image: str | None = None,
               workdir: str | None = None) -> list[str]:
    """srun options that run a step in the allocation's named pyxis container on each node.

    With ``image`` the container is created from it if it does not exist yet (the launch); without,
    the existing one is used. Named containers live as long as the allocation."""
    args = [f"--container-name={name}"]
    if image:
        args.append(f"--container-image={enroot_uri(image)}")
    if volumes:
        args.append(f"--container-mounts={pyxis_mounts(volumes)}")
    if workdir:
        args.append(f"--container-workdir={workdir}")
    return [*args, "--no-container-mount-home", "--container-remap-root"]


ARGUMENT_MAX = 128 * 1024 - 4096  # Linux refuses one argv string of 128 KiB (MAX_ARG_STRLEN); a margin


def spread_command(job_id: str, nodes: list[str], by_node: Mapping[str, str],
                   extra: Sequence[str] = ()) -> list[str]:
    """One task per node in a single step; each task runs the command for its own node name.

    The dispatch is on ``SLURMD_NODENAME`` rather than ``SLURM_NODEID``: the node id follows
    Slurm's node order, the name is what the plan was built from. While every node's command
    fits in one argument it is a ``case`` in argv; past that (many nodes) each task takes its
    command from a bundle on stdin (``spread_input``) and becomes it (``remote/slurm_broadcast.py``).
    """
    head = ["srun", f"--jobid={job_id}", "--overlap", f"--nodes={len(nodes)}", "--ntasks-per-node=1",
            f"--nodelist={','.join(nodes)}", "--kill-on-bad-exit=0", "--quiet", *extra]
    script = _spread_script(nodes, by_node)
    if len(script.encode("utf-8")) <= ARGUMENT_MAX:
        return [*head, "bash", "-c", script]
    return [*head, "--input=all", "bash", "-c", sb.EXEC_PROGRAM, "cvs-spread"]


def spread_input(nodes: list[str], by_node: Mapping[str, str]) -> bytes | None:
    """What ``spread_command``'s srun reads on stdin: None for the ``case`` form, else the bundle."""
    if len(_spread_script(nodes, by_node).encode("utf-8")) <= ARGUMENT_MAX:
        return None
    return sb.build_bundle(nodes, [by_node[n] for n in nodes], [None] * len(nodes))


def _spread_script(nodes: list[str], by_node: Mapping[str, str]) -> str:
    cases = "".join(f"{shlex.quote(name)}) {by_node[name]} ;; " for name in nodes)
    return (f'case "$SLURMD_NODENAME" in {cases}'
            '*) echo "cvs-tasks: no command for node $SLURMD_NODENAME" >&2; exit 97 ;; esac')


def hostnames_command(nodelist: str) -> list[str]:
    return ["scontrol", "show", "hostnames", nodelist]


def show_job_command(job_id: str) -> list[str]:
    return ["scontrol", "show", "job", "--oneliner", job_id]


def show_nodes_command(names: Iterable[str] | None = None) -> list[str]:
    cmd = ["scontrol", "show", "node", "--oneliner"]
    names = list(names or [])
    if names:
        cmd.append(",".join(names))
    return cmd


def my_jobs_command(user: str) -> list[str]:
    """This user's jobs as ``id|name|state`` lines."""
    return ["squeue", "-h", f"--user={user}", "-o", "%i|%j|%T"]


def parse_my_jobs(text: str, name_prefix: str) -> list[tuple[str, str, str]]:
    """(id, name, state) of the jobs whose name starts with ``name_prefix``."""
    rows = [line.strip().split("|", 2) for line in text.splitlines() if line.count("|") >= 2]
    return [(i, n, st) for i, n, st in rows if n.startswith(name_prefix)]


def cancel_command(job_id: str) -> list[str]:
    return ["scancel", job_id]


def steps_command(job_id: str) -> list[str]:
    """The job's running steps as ``<job>.<step> <name>`` lines."""
    return ["squeue", "--steps", "--noheader", f"--jobs={job_id}", "--format=%i %j"]


def steps_named(listing: str, name: str) -> list[str]:
    """The step ids (``<job>.<step>``) ``steps_command`` lists under ``name``."""
    return [fields[0] for fields in (line.split() for line in listing.splitlines())
            if len(fields) == 2 and fields[1] == name and re.fullmatch(r"\d+\.\d+", fields[0])]


_LAUNCH_FAILED = re.compile(r"Task launch for \S+ failed on node (\S+): (.*)")


def launch_failures(stderr: str) -> dict[str, str]:
    """The nodes on which srun could not launch a step's task, each with srun's line about it."""
    failed: dict[str, str] = {}
    for line in stderr.splitlines():
        found = _LAUNCH_FAILED.search(line)
        if found:
            failed.setdefault(found.group(1), line.removeprefix("srun: error: ").strip())
    return failed


def drain_argv(node: str, reason: str) -> list[str]:
    return ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"]


def drain_command(node: str, reason: str) -> str:
    """The exact line an operator runs to take a bad node out of service (printed, not run)."""
    return f"scontrol update NodeName={shlex.quote(node)} State=DRAIN Reason={shlex.quote(reason)}"


def parse_records(text: str) -> list[dict[str, str]]:
    """``scontrol show ... --oneliner``: one record per line of ``Key=Value`` words.

    A value may hold spaces only in the last fields Slurm prints (``Reason=...``); a word without
    ``=`` is glued to the previous value.
    """
    records = []
    for line in text.splitlines():
        fields: dict[str, str] = {}
        last = None
        for word in line.split():
            key, sep, value = word.partition("=")
            if sep and re.fullmatch(r"[A-Za-z][A-Za-z0-9_:/]*", key):
                fields[key] = value
                last = key
            elif last is not None:
                fields[last] += " " + word
        if fields:
            records.append(fields)
    return records


@dataclass(frozen=True)
class SlurmNode:
    name: str
    address: str
    state: str
    reason: str = ""

    @property
    def usable(self) -> bool:
        flags = re.split(r"[+*]", self.state.upper())
        return not any(f in UNUSABLE_STATES for f in flags if f) and not self.state.endswith("*")


def parse_nodes(text: str) -> dict[str, SlurmNode]:
    nodes = {}
    for rec in parse_records(text):
        name = rec.get("NodeName")
        if name:
            reason = rec.get("Reason", "")
            nodes[name] = SlurmNode(name, rec.get("NodeAddr") or name, rec.get("State", "UNKNOWN"),
                                    "" if reason in ("", "(null)") else reason)
    return nodes


@dataclass(frozen=True)
class JobInfo:
    job_id: str
    state: str
    nodelist: str
    reason: str
    time_limit: str

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"

    @property
    def ended(self) -> bool:
        return self.state in ENDED_JOB_STATES or self.state == "COMPLETING"


def parse_job(text: str) -> JobInfo | None:
    for rec in parse_records(text):
        if "JobId" in rec:
            nodelist = rec.get("NodeList", "")
            return JobInfo(rec["JobId"], rec.get("JobState", "UNKNOWN"),
                           "" if nodelist == "(null)" else nodelist, rec.get("Reason", "None"),
                           rec.get("TimeLimit", ""))
    return None


# srun's own complaints (as opposed to the task's output): the step never ran or was cut short.
_STEP_FAILURES = (
    (re.compile(r"Unable to create step for job \d+: (.*)"), "the allocation cannot start a step: {0}"),
    (re.compile(r"Invalid job id specified"), "the allocation is gone (invalid job id)"),
    (re.compile(r"Slurm job \d+ has expired"), "the allocation has ended"),
    (re.compile(r"Job step creation temporarily disabled"), "Slurm refused a new step (temporarily disabled)"),
    (re.compile(r"Task launch for \S+ failed on node (\S+): (.*)"), "task launch failed on {0}: {1}"),
    (re.compile(r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S+ DUE TO TIME LIMIT"),
     "the allocation hit its time limit"),
    (re.compile(r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S+ DUE TO PREEMPTION"), "the allocation was preempted"),
    (re.compile(r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT"), "the step was cancelled (scancel)"),
)


_TASK_EXIT = re.compile(r"^srun: error: \S+: tasks? [\d,-]+: (?:Exited with exit code \d+|Terminated|Killed)\s*$")


def task_stderr(stderr: str) -> str:
    """The task's own stderr: srun's per-task exit lines are dropped (the exit status says it)."""
    return "".join(line for line in stderr.splitlines(keepends=True) if not _TASK_EXIT.match(line))


def step_failure(stderr: str) -> str | None:
    """What went wrong with the step itself, from srun's stderr; None when the task just ran."""
    for line in stderr.splitlines():
        for pattern, text in _STEP_FAILURES:
            found = pattern.search(line)
            if found:
                return text.format(*found.groups())
    return None
