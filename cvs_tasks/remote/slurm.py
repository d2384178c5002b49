"""Nodes from a Slurm allocation: request or attach, resolve, run steps on them, release.

``SlurmHosts`` is a ``Hosts`` like SSH and local ones: a command on every node (or a command per
node) is one ``srun --overlap`` step with a task per node (``remote/slurm_broadcast.py``), so
everything above ``remote/`` (runtimes, checks, clean-up) works unchanged and a broadcast costs one
job step whatever the node count. The training job itself is launched
as one step with a task per node (``spread``), as Slurm sites expect.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
import uuid
from dataclasses import dataclass
from typing import Mapping, Sequence

from cvs_tasks.errors import BadInput, InfraError
from cvs_tasks.remote import slurm_broadcast as sb
from cvs_tasks.remote import slurm_cmd as sc
from cvs_tasks.remote.hosts import Hosts
from cvs_tasks.remote.local import run_local
from cvs_tasks.remote.results import Node, RawResult, last_line
from cvs_tasks.remote.slurm_follow_step import FollowStep

CLIENT_TIMEOUT_S = 60.0
CANCEL_TIMEOUT_S = 15.0  # finding and cancelling a timed-out broadcast's step


@dataclass(frozen=True)
class Allocation:
    """A Slurm job holding the nodes; ``owned`` means the harness requested it and releases it."""

    job_id: str
    nodes: tuple[sc.SlurmNode, ...]
    owned: bool

    def as_record(self) -> dict:
        return {"job_id": self.job_id, "owned": self.owned,
                "nodes": [{"name": n.name, "address": n.address} for n in self.nodes]}


class SlurmClient:
    """Slurm's client commands on this machine, with ``SLURM_CONF`` when the cluster file names one."""

    def __init__(self, slurm_conf: str | None = None, timeout: float = CLIENT_TIMEOUT_S):
        self.env = dict(os.environ)
        if slurm_conf:
            self.env["SLURM_CONF"] = slurm_conf
        self.timeout = timeout

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(list(argv), capture_output=True, text=True, env=self.env,
                                  timeout=timeout or self.timeout)
        except FileNotFoundError:
            raise InfraError(f"{argv[0]} not found: run the harness where Slurm's client commands are "
                             "installed (a login node), or use a static node_dict") from None
        except subprocess.TimeoutExpired:
            raise InfraError(f"`{' '.join(argv[:3])} ...` did not answer within {timeout or self.timeout:g} s "
                             "(is slurmctld reachable?)") from None

    def check(self, argv: Sequence[str], what: str) -> str:
        done = self.run(argv)
        if done.returncode != 0:
            raise InfraError(f"{what} failed: {last_line(done.stderr or done.stdout) or f'exit {done.returncode}'}")
        return done.stdout

    # -- queries ------------------------------------------------------------------------------
    def job(self, job_id: str) -> sc.JobInfo | None:
        done = self.run(sc.show_job_command(job_id))
        return sc.parse_job(done.stdout) if done.returncode == 0 else None

    def hostnames(self, nodelist: str) -> list[str]:
        return self.check(sc.hostnames_command(nodelist), f"expanding node list {nodelist!r}").split()

    def nodes(self, names: Sequence[str] | None = None) -> dict[str, sc.SlurmNode]:
        return sc.parse_nodes(self.check(sc.show_nodes_command(names), "scontrol show node"))

    # -- the allocation -----------------------------------------------------------------------
    def refuse_unusable(self, names: Sequence[str]) -> None:
        """Drained, down or unresponsive nodes are named before anything is launched."""
        known = self.nodes(names)
        bad = [known.get(n) or sc.SlurmNode(n, n, "UNKNOWN", "not known to slurmctld") for n in names]
        bad = [n for n in bad if not n.usable]
        if bad:
            listed = "; ".join(f"{n.name} is {n.state}" + (f" ({n.reason})" if n.reason else "") for n in bad)
            raise InfraError(f"Slurm node(s) not usable: {listed}. Resume them (`scontrol update "
                             f"NodeName=... State=RESUME`) or leave them out (scheduler.exclude)")

    def request(self, req: sc.AllocationRequest) -> Allocation:
        if req.nodelist:
            self.refuse_unusable(self.hostnames(req.nodelist))
        done = self.run(sc.salloc_command(req), timeout=req.wait_s + CLIENT_TIMEOUT_S)
        job_id, reason = sc.parse_salloc(done.stderr + "\n" + done.stdout)
        if reason is not None or job_id is None:
            if job_id:
                self.release(job_id)
            raise InfraError(f"Slurm allocation of {req.nodes} node(s) not granted within {req.wait_s} s: "
                             f"{reason}. Check `sinfo` for free nodes, the partition, account and time limit")
        return self._resolve(job_id, owned=True, expected=req.nodes)

    def attach(self, job_id: str, expected: int | None = None) -> Allocation:
        info = self.job(job_id)
        if info is None or not info.running:
            state = info.state if info else "unknown to slurmctld"
            raise BadInput(f"Slurm job {job_id} is not a running allocation ({state}); start the harness "
                           "inside a running allocation or let it request one (scheduler.nodes)")
        return self._resolve(job_id, owned=False, expected=expected)

    def _resolve(self, job_id: str, *, owned: bool, expected: int | None) -> Allocation:
        info = self.job(job_id)
        if info is None or not info.nodelist:
            raise InfraError(f"Slurm job {job_id} has no node list (state {info.state if info else 'unknown'})")
        names = self.hostnames(info.nodelist)
        if expected is not None and len(names) != expected:
            if owned:
                self.release(job_id)
            raise BadInput(f"Slurm job {job_id} holds {len(names)} node(s), the cluster file asks for "
                           f"{expected} (scheduler.nodes)")
        self.refuse_unusable(names)
        known = self.nodes(names)
        return Allocation(job_id, tuple(known[n] for n in names), owned)

    def release(self, job_id: str) -> bool:
        """scancel; true when Slurm accepted it (an already ended job counts as released)."""
        done = self.run(sc.cancel_command(job_id))
        return done.returncode == 0 or "Invalid job id" in done.stderr


class SlurmHosts(Hosts):
    """The allocation's nodes; each broadcast is one ``srun --overlap`` step with a task per node."""

    def __init__(self, client: SlurmClient, allocation: Allocation, nodes: Sequence[Node] | None = None,
                 step_args: Sequence[str] = ()):
        super().__init__(nodes or [Node(n.name, n.address, 0, rank) for rank, n in enumerate(allocation.nodes)])
        self.client = client
        self.allocation = allocation
        self.step_args = tuple(step_args)  # e.g. pyxis: every step in the run's container

    def with_step_args(self, step_args: Sequence[str]) -> "SlurmHosts":
        """The same nodes, every step run with these extra srun options."""
        return SlurmHosts(self.client, self.allocation, self.nodes, step_args)

    def _exec_many(self, commands, stdins, timeout):
        """Every node's command in one step with a task per node (``remote/slurm_broadcast.py``).

        When srun cannot launch a node's task (its slurmd is down, say), it aborts the whole step;
        no task had its bundle yet (srun hands stdin to the tasks only once all of them are up,
        docs/measured.md), so that node gets srun's words as its error and the step runs again
        on the others, within what is left of ``timeout``."""
        results: list[RawResult | None] = [None] * len(self.nodes)
        deadline = time.monotonic() + timeout
        pending, left = list(range(len(self.nodes))), timeout
        while pending:
            raws, again = self._step(pending, commands, stdins, left)
            for index, raw in zip(pending, raws):
                results[index] = raw
            left = round(deadline - time.monotonic(), 1)
            pending = again if left > 1 else []
        return results

    def _step(self, indices, commands, stdins, timeout) -> tuple[list[RawResult], list[int]]:
        """One step on the nodes ``indices``: their results, and those of them to run again (their
        task never started because another node's could not be launched)."""
        names = [self.nodes[i].name for i in indices]
        bundle = sb.build_bundle(names, [commands[i] for i in indices], [stdins[i] for i in indices])
        step_name = f"cvs-{uuid.uuid4().hex[:12]}"
        argv = sb.broadcast_command(self.allocation.job_id, names, self.step_args, step_name=step_name,
                                    limit_s=timeout)
        raw = run_local(_argv_line(argv), bundle, timeout, env=self.client.env)
        reports, stray = sb.parse_records(raw.stdout, len(names))
        srun_says = raw.stderr.decode("utf-8", "replace").splitlines() + stray.decode("utf-8", "replace").splitlines()
        failed = sc.launch_failures("\n".join(srun_says))
        if raw.error is not None or failed:  # srun killed at the timeout, or it gave up: the step may live on
            self._cancel_step(step_name)
        retry = raw.error is None and bool(failed) and set(failed) <= set(names)
        results, again = [], []
        for index, name, report in zip(indices, names, reports):
            if report is not None:
                results.append(report)
            elif name in failed:
                results.append(RawResult(None, b"", b"", f"Slurm could not start its task in job "
                                                         f"{self.allocation.job_id}'s step: {failed[name]}"))
            else:
                results.append(RawResult(None, b"", b"", self._unreported(name, raw, srun_says)))
                if retry:
                    again.append(index)
        return results, again

    def _cancel_step(self, step_name: str) -> None:
        """End a timed-out broadcast's step on every node (``scancel <job>.<step>``); best effort: its
        tasks bound their own waits and the step has Slurm's time limit."""
        try:
            listing = self.client.run(sc.steps_command(self.allocation.job_id), timeout=CANCEL_TIMEOUT_S)
            for step in sc.steps_named(listing.stdout, step_name):
                self.client.run(sc.cancel_command(step), timeout=CANCEL_TIMEOUT_S)
        except InfraError:
            pass

    def _unreported(self, node: str, raw: RawResult, srun_says: Sequence[str]) -> str:
        """Why a node's task left no result: the timeout, a step failure, or srun's word about it."""
        if raw.error is not None:
            return raw.error  # timed out, or srun could not start
        failure = sc.step_failure("\n".join(srun_says))
        if failure:
            return f"Slurm job {self.allocation.job_id}: {failure}"
        named = [line for line in srun_says if f" {node}:" in line or f" {node} " in line]
        detail = last_line("\n".join(named or srun_says))
        return (f"its task in Slurm job {self.allocation.job_id}'s step ended without reporting "
                f"(srun exit {raw.exit_code}" + (f": {detail})" if detail else ")"))

    def _follower_start_all(self):
        """Every node's follower in one step with a task per node, started once per job."""
        def start_all(_opener, jobs):
            try:
                step = FollowStep(self.allocation.job_id, [self.nodes[i].name for i, _ in jobs], [i for i, _ in jobs],
                                  [args for _, args in jobs], self.step_args, self.client.env)
            except Exception as exc:  # noqa: BLE001 - a step that cannot start is every node's Lost
                return [exc] * len(jobs)
            return step.streams

        return start_all

    def _follower_opener(self):
        """A restarted follower: one ``srun --overlap`` step on that node alone, from the held offset."""
        def open_one(index, args):
            return FollowStep(self.allocation.job_id, [self.nodes[index].name], [index], [args], self.step_args,
                              self.client.env).streams[0]

        return open_one

    def subset(self, indices):
        return SlurmHosts(self.client, self.allocation, [self.nodes[i] for i in indices], self.step_args)

    def spread(self, by_rank: Sequence[str], output: str | os.PathLike) -> subprocess.Popen:
        """Start one step with a task per node running ``by_rank[i]`` on node i; returns srun's process.

        srun's own output (its messages, the tasks' console) goes to ``output``, never to a pipe
        nobody drains. The caller watches the job through its logs and stops it by signalling
        this process (srun forwards the signal to every task)."""
        names = [n.name for n in self.nodes]
        by_node = dict(zip(names, by_rank))
        argv = sc.spread_command(self.allocation.job_id, names, by_node, self.step_args)
        bundle = sc.spread_input(names, by_node)  # many nodes: the commands come on stdin
        with open(output, "ab") as sink:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL if bundle is None else subprocess.PIPE,
                                    stdout=sink, stderr=subprocess.STDOUT, env=self.client.env,
                                    start_new_session=True)
        if bundle is not None:
            try:
                proc.stdin.write(bundle)
                proc.stdin.close()  # EOF: every task has its whole bundle
            except OSError:
                pass  # srun ended already: the watcher sees the job never start, srun.log says why
        return proc


def _argv_line(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def drain_lines(bad: Mapping[str, str]) -> list[str]:
    """For each node judged bad (name -> why), the ``scontrol`` line an operator would run."""
    return [sc.drain_command(name, f"cvs-tasks: {why}"[:200]) for name, why in bad.items()]
