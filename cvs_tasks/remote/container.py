"""Container runtimes: where the training commands run on each node.

``DockerRuntime`` drives the Docker CLI over each node's own connection (one SSH session
model, one timeout model, one host-key policy); ``HostRuntime`` runs on the node itself.
Lifetimes: ``per_run`` (clear leftovers, launch), ``persistent`` (attach when running on every
node, refuse when only some, launch when none) and ``no_launch`` (verify, never touch).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from cvs_tasks import runtimes
from cvs_tasks.remote import docker_cmd as dc
from cvs_tasks.remote.hosts import Hosts
from cvs_tasks.remote.results import Node, NodeResult, node_error
from cvs_tasks.remote.retry import Attempt, RetryPolicy


@dataclass(frozen=True)
class DockerTimeouts:
    """Seconds allowed per Docker step; pulls and loads of multi-GB images take long."""

    command: float = 60.0
    run: float = 180.0
    pull: float = 1800.0
    load: float = 1800.0
    check: float = 30.0


class Runtime(ABC):
    """One container (or none) per node; ``attempts`` and ``mode`` are for the stage record."""

    def __init__(self, hosts: Hosts, spec: dc.ContainerSpec):
        self.hosts = hosts
        self.spec = spec
        self.attempts: list[Attempt] = []
        self.mode: str | None = None  # launched | attached | verified | host

    @classmethod
    def for_run(cls, hosts: Hosts, spec: dc.ContainerSpec, *, run_id: str, owner: str, nnodes: int,
                timeouts: DockerTimeouts | None = None, retry: RetryPolicy | None = None) -> Runtime:
        """The runtime of one run (``runtime_for``); a runtime takes from the run what it uses."""
        return cls(hosts, spec)

    @abstractmethod
    def launch(self) -> list[NodeResult]: ...

    def exec(self, command: str | Sequence[str], *, timeout: float,
             stdin: str | bytes | None = None) -> list[NodeResult]:
        """Run a command (or command i on node i) where the job runs: in the container, or on the node."""
        commands = [command] * len(self.hosts) if isinstance(command, str) else list(command)
        return self.hosts.run([self.command(c) for c in commands], timeout=timeout, stdin=stdin)

    @abstractmethod
    def command(self, command: str) -> str:
        """The node command that runs ``command`` where the job runs (nothing is run)."""

    @abstractmethod
    def running(self) -> list[bool]: ...

    @abstractmethod
    def remove(self, force: bool = False) -> list[NodeResult]: ...


def _ok(node: Node, stdout: str = "") -> NodeResult:
    return NodeResult(node.name, node.rank, True, 0, stdout, "", None)


def _failed(node: Node, message: str) -> NodeResult:
    return NodeResult(node.name, node.rank, False, None, "", "", node_error(node, message))


def _detail(node: Node, result: NodeResult) -> str:
    """A result's error without its ``node X:`` prefix, to put a step name in front of it."""
    prefix = f"node {node.label}: "
    text = result.error or "failed"
    return text[len(prefix):] if text.startswith(prefix) else text


class DockerRuntime(Runtime):
    def __init__(self, hosts: Hosts, spec: dc.ContainerSpec, *, run_id: str, owner: str,
                 nnodes: int, timeouts: DockerTimeouts | None = None,
                 retry: RetryPolicy | None = None, sleep: Callable[[float], None] = time.sleep):
        super().__init__(hosts, spec)
        self.run_id = run_id
        self.owner = owner
        self.nnodes = nnodes
        self.timeouts = timeouts or DockerTimeouts()
        self.retry = retry or RetryPolicy(attempts=3, first_delay=2.0)
        self._sleep = sleep

    @classmethod
    def for_run(cls, hosts, spec, *, run_id, owner, nnodes, timeouts=None, retry=None):
        return cls(hosts, spec, run_id=run_id, owner=owner, nnodes=nnodes, timeouts=timeouts, retry=retry)

    # --- queries --------------------------------------------------------------------------
    def states(self, indices: Sequence[int] | None = None) -> list[tuple[str | None, str | None]]:
        """(state, error) per node: state is docker's status or ``absent``; error if the probe failed."""
        picked = list(range(len(self.hosts))) if indices is None else list(indices)
        out = []
        for i, r in zip(picked, self._on(picked).run(dc.state_command(self.spec.name),
                                                       timeout=self.timeouts.command)):
            if r.ok:
                out.append((r.stdout.strip() or "unknown", None))
            elif r.exit_code is not None and dc.is_missing_container(r.stderr):
                out.append(("absent", None))
            else:
                out.append((None, node_error(self.hosts.nodes[i],
                                             "docker inspect: " + _detail(self.hosts.nodes[i], r))))
        return out

    def running(self) -> list[bool]:
        return [state == "running" for state, _ in self.states()]

    # --- lifecycle ------------------------------------------------------------------------
    def launch(self) -> list[NodeResult]:
        if self.spec.lifetime == "no_launch":
            return self._verify_existing()
        if self.spec.lifetime == "persistent":
            attached = self._attach_persistent()
            if attached is not None:
                return attached
        return self._launch_fresh()

    def _verify_existing(self) -> list[NodeResult]:
        self.mode = "verified"
        results = []
        for node, (state, error) in zip(self.hosts.nodes, self.states()):
            if error:
                results.append(NodeResult(node.name, node.rank, False, None, "", "", error))
            elif state != "running":
                results.append(_failed(node, f"container {self.spec.name!r} is {state}; lifetime "
                                             "no_launch never starts containers — start it first"))
            else:
                results.append(_ok(node, "running"))
        return results

    def _attach_persistent(self) -> list[NodeResult] | None:
        """Results when attaching or refusing; None when no node runs it (launch afresh)."""
        states = self.states()
        nodes = self.hosts.nodes
        if any(err for _, err in states):
            return [NodeResult(n.name, n.rank, False, None, "", "", err) if err
                    else _failed(n, "not checked further: the probe failed on another node")
                    for n, (_, err) in zip(nodes, states)]
        up = [state == "running" for state, _ in states]
        if all(up):
            self.mode = "attached"
            return [_ok(n, "attached") for n in nodes]
        if not any(up):
            return None
        on = ", ".join(n.label for n, u in zip(nodes, up) if u)
        off = ", ".join(n.label for n, u in zip(nodes, up) if not u)
        self.mode = "refused"
        hint = (f"refusing to relaunch a persistent container that runs on some nodes only "
                f"(running on: {on}; not on: {off}); remove it with `invoke teardown` or start it "
                "on the others")
        return [_failed(n, f"container {self.spec.name!r} is "
                           f"{'running' if u else state}: {hint}")
                for n, u, (state, _) in zip(nodes, up, states)]

    def _launch_fresh(self) -> list[NodeResult]:
        self.mode = "launched"
        nodes = self.hosts.nodes
        failed: dict[int, str] = {}
        alive = list(range(len(nodes)))

        cleared = self._on(alive).run_until_ok(
            self._remove_own(), timeout=self.timeouts.command, step="docker rm",
            policy=self.retry, record=self.attempts, ok=lambda r: _removed(r) or _in_use(r) is not None,
            sleep=self._sleep)
        self._note(alive, cleared, failed, "removing the old container", _removed)
        for i, r in zip(alive, cleared):
            if _in_use(r) is not None:  # another run's container: refused, named, left alone
                failed[i] = node_error(nodes[i], self._in_use_message(_in_use(r)))
        alive = [i for i in alive if i not in failed]

        self._ensure_image([i for i in alive], failed)
        alive = [i for i in alive if i not in failed]

        started: dict[int, str] = {}
        if alive:
            command = dc.run_command(self.spec, run_id=self.run_id, owner=self.owner,
                                     nnodes=self.nnodes)
            answers = self._on(alive).run(command, timeout=self.timeouts.run)
            for i, r in zip(alive, answers):
                if r.ok:
                    started[i] = r.stdout.strip()
                else:
                    failed[i] = node_error(nodes[i], "docker run: " + _detail(nodes[i], r))
        if started:
            for i, (state, error) in zip(started, self.states(list(started))):
                if error:
                    failed[i] = error
                elif state != "running":
                    failed[i] = node_error(nodes[i], f"container is {state} right after docker run "
                                                     f"(see `docker logs {self.spec.name}`)")
        if not failed:
            return [_ok(n, started[i]) for i, n in enumerate(nodes)]
        self._roll_back(list(started))
        where = ", ".join(nodes[i].label for i in sorted(failed))
        return [NodeResult(n.name, n.rank, False, None, "", "", failed[i]) if i in failed
                else _failed(n, f"removed again: the launch failed on {where}")
                for i, n in enumerate(nodes)]

    def _ensure_image(self, alive: list[int], failed: dict[int, str]) -> None:
        if not alive:
            return
        image = self.spec.image
        probe = self._on(alive).run(dc.image_present_command(image), timeout=self.timeouts.command)
        missing = [i for i, r in zip(alive, probe) if not r.ok]
        if not missing:
            return
        if self.spec.image_tar:
            step, results = "docker load", self._on(missing).run(
                dc.load_command(self.spec.image_tar), timeout=self.timeouts.load)
        else:
            registry = self.spec.args.registry
            if registry is not None:
                login = self._on(missing).run_until_ok(
                    dc.login_command(registry), timeout=self.timeouts.command, step="docker login",
                    policy=self.retry, record=self.attempts, sleep=self._sleep)
                self._note(missing, login, failed, "docker login")
                missing = [i for i in missing if i not in failed]
                if not missing:
                    return
            step, results = "docker pull", self._on(missing).run_until_ok(
                dc.pull_command(image), timeout=self.timeouts.pull, step="docker pull",
                policy=self.retry, record=self.attempts, sleep=self._sleep)
        self._note(missing, results, failed, f"{step} {image}")
        loaded = [i for i in missing if i not in failed]
        if loaded:
            again = self._on(loaded).run(dc.image_present_command(image),
                                         timeout=self.timeouts.command)
            for i, r in zip(loaded, again):
                if not r.ok:
                    failed[i] = node_error(self.hosts.nodes[i],
                                           f"image {image} is still missing after {step}")

    def _remove_own(self) -> str:
        return dc.remove_own_command(self.spec.name, self.run_id)

    def _in_use_message(self, holder: tuple[str, str]) -> str:
        run, owner = holder
        who = f"run {run} of {owner or 'an unknown user'}" if run else "a container cvs-tasks did not start"
        return (f"container {self.spec.name!r} is running for {who}, not this run ({self.run_id}); it was left "
                "alone. Wait for that run to end or set another container.name; if that run is gone, "
                "`invoke cleanup --cluster <cluster file>` removes its containers")

    def _roll_back(self, started: list[int]) -> None:
        if started:
            self._on(started).run_until_ok(
                self._remove_own(), timeout=self.timeouts.command,
                step="docker rm (roll back)", policy=self.retry, record=self.attempts,
                ok=_removed, sleep=self._sleep)

    def command(self, command: str) -> str:
        return dc.exec_command(self.spec.name, command)

    def remove(self, force: bool = False) -> list[NodeResult]:
        """Remove the container everywhere (absent counts as removed).

        ``no_launch`` containers are never removed; ``persistent`` ones only with ``force``.
        """
        if self.spec.lifetime == "no_launch" or (self.spec.lifetime == "persistent" and not force):
            return [_ok(n, f"{self.spec.lifetime}: left running") for n in self.hosts.nodes]
        shared = self.spec.lifetime == "persistent"  # forced: shared by runs, removed whoever started it
        answers = self.hosts.run_until_ok(
            dc.remove_command(self.spec.name) if shared else self._remove_own(), timeout=self.timeouts.command,
            step="docker rm", policy=self.retry, record=self.attempts,
            ok=lambda r: _removed(r) or _in_use(r) is not None, sleep=self._sleep)
        return [_ok(n, "removed") if _removed(r)
                else _ok(n, "left running: " + self._in_use_message(_in_use(r))) if _in_use(r) is not None
                else r for n, r in zip(self.hosts.nodes, answers)]

    # --- helpers --------------------------------------------------------------------------
    def _on(self, indices: Sequence[int]) -> Hosts:
        if list(indices) == list(range(len(self.hosts))):
            return self.hosts
        return self.hosts.subset(indices)

    def _note(self, indices: list[int], results: list[NodeResult], failed: dict[int, str],
              step: str, ok: Callable[[NodeResult], bool] = lambda r: r.ok) -> None:
        for i, r in zip(indices, results):
            if not ok(r):
                failed[i] = node_error(self.hosts.nodes[i], f"{step}: {_detail(self.hosts.nodes[i], r)}")


def _in_use(result: NodeResult) -> tuple[str, str] | None:
    """(run id, owner) when the node refused to remove a container another run is using."""
    if result.ok or result.exit_code != dc.IN_USE_EXIT:
        return None
    return dc.in_use_by(result.stderr)


def _removed(result: NodeResult) -> bool:
    """``docker rm -f`` succeeded, or there was nothing to remove."""
    return result.ok or (result.exit_code is not None and dc.is_missing_container(result.stderr))


class HostRuntime(Runtime):
    """The ``host`` runtime: commands run on the node itself under ``bash -lc``."""

    def __init__(self, hosts: Hosts, spec: dc.ContainerSpec, *, check_timeout: float = 30.0):
        super().__init__(hosts, spec)
        self.check_timeout = check_timeout

    def _answer(self) -> list[NodeResult]:
        return self.hosts.run("true", timeout=self.check_timeout)

    def launch(self):
        self.mode = "host"
        return self._answer()

    def command(self, command: str) -> str:
        return dc.host_shell_command(command)

    def running(self):
        return [r.ok for r in self._answer()]

    def remove(self, force: bool = False):
        return self._answer()


def runtime_for(hosts: Hosts, container_spec: Any, *, run_id: str, owner: str, nnodes: int,
                timeouts: DockerTimeouts | None = None, retry: RetryPolicy | None = None) -> Runtime:
    """The runtime the ``container`` block asks for: ``runtime.name``'s row in ``cvs_tasks.runtimes``
    names the class (BadInput naming the known runtimes for any other name)."""
    spec = (container_spec if isinstance(container_spec, dc.ContainerSpec)
            else dc.container_spec(container_spec))
    cls: type[Runtime] = runtimes.get(spec.runtime).container_type()
    return cls.for_run(hosts, spec, run_id=run_id, owner=owner, nnodes=nnodes, timeouts=timeouts, retry=retry)
