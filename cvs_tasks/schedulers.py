"""Schedulers (static nodes, Slurm, ...): the ``Scheduler`` interface and its registry.

A scheduler is where a run's nodes come from and how its job is started on them: it acquires the
nodes when the run first needs them (binding the plan to them), starts a job across them, finds
them again for teardown (re-acquiring them when an allocation ended), lets them go, prints what a
dry run would ask of it, judges the nodes after a run, and finds what killed runs left behind
(``invoke cleanup``). The lifecycle asks the run's scheduler (``for_cluster``) and never which one
it is; a new engine is one module that subclasses ``Scheduler`` plus a ``register`` call
(``tests/unit/test_scheduler_added.py`` adds one and runs the whole lifecycle through it).

The cluster file picks one by ``scheduler.name``; a cluster file without a scheduler block lists
its nodes (``STATIC``). Layers: the config layer asks this registry which names a scheduler block
may give, so this module imports nothing of the harness; the shipped schedulers are lifecycle
modules named here as ``"module:object"`` and loaded the first time one is asked for.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

from cvs_tasks import runtimes
from cvs_tasks.errors import BadInput

if TYPE_CHECKING:
    from cvs_tasks.config import Cluster, HostSpec, Suite
    from cvs_tasks.jobs.spec import LaunchPlan
    from cvs_tasks.lifecycle.leftovers import CleanupOutcome
    from cvs_tasks.lifecycle.session import Session
    from cvs_tasks.lifecycle.watch import WatchOutcome
    from cvs_tasks.remote.hosts import Hosts


class JobHandle(Protocol):
    """What a scheduler's launch leaves the harness to end (Slurm: the srun process of the job's step)."""

    cause: str | None  # what the scheduler said ended the job, when it failed (a time limit, a cancellation)

    def finish(self, outcome: WatchOutcome | None) -> None:
        """The watch is over: end what still runs (bounded) and name the scheduler's cause on a failure."""


class Scheduler(ABC):
    """One way of getting nodes and starting jobs on them. Subclasses set the names and override what differs."""

    name: str  # registry key: the cluster file's scheduler.name; the run manifest's key for its record
    label: str  # what people read: "Slurm: job 12 holds ...", "before the Slurm allocation"
    # the nodes are handed out when the run starts: the cluster file need not list them, MASTER_ADDR is
    # the first node given, and nothing about them can be checked before the run
    assigns_nodes: bool = False

    @abstractmethod
    def acquire(self, session: Session) -> Hosts:
        """The run's nodes as Hosts, found or requested now; re-binds ``session.plan`` to them when it assigns."""

    @abstractmethod
    def hosts_for_teardown(self, session: Session) -> Hosts | None:
        """The nodes to tear down on, asked afresh (an allocation may have ended); None: the run held none."""

    def release(self, session: Session) -> str | None:
        """Let the run's nodes go; what was done, if anything."""
        return None

    @abstractmethod
    def launch(self, session: Session, launch: LaunchPlan, output_dir: Path) -> JobHandle | None:
        """Start every node's job (``output_dir``: the job's folder in the run directory, for what the
        scheduler itself prints); None when nothing but the nodes' own jobs is left running."""

    def dry_run_lines(self, session: Session) -> list[str]:
        """What a real run would ask of the scheduler, printed by ``--dry-run`` before the node commands."""
        return []

    def dry_run_launch_lines(self, session: Session, launch: LaunchPlan) -> list[str]:
        """What a real run would start the job with, beyond each node's launch line."""
        return []

    def judge_nodes(self, session: Session) -> list[str]:
        """After a run: what to do with the nodes it blames (printed, recorded); the lines said."""
        return []

    @abstractmethod
    def cleanup(self, cluster: Cluster, where: dict[str, Any], *, dry_run: bool,
                say: Callable[[str], None]) -> CleanupOutcome:
        """``invoke cleanup``: find (unless ``dry_run``, remove) what killed runs left (``where``: the
        ``lifecycle.leftovers.scan_leftovers`` arguments)."""

    def placeholders(self, cluster: Cluster) -> tuple[HostSpec, ...]:
        """Stand-ins for nodes not handed out yet (the plan's size before ``acquire``)."""
        return ()

    def check_runtime(self, suite: Suite, cluster: Cluster) -> None:
        """BadInput when the suite's container runtime cannot run on these nodes: by default one that
        runs only as steps of a Slurm allocation."""
        actual = suite.config.container.runtime.name
        kind = runtimes.get(actual)
        if kind.slurm_only:
            raise BadInput(f"{suite.config_path}: container.runtime.name {actual!r} needs a Slurm cluster file "
                           f"(scheduler.container {kind.scheduler_container}); over SSH use "
                           f"{runtimes.spoken(runtimes.over_ssh())}")

    # -- the run manifest's record of this scheduler (its own key) --------------------------------
    def recorded(self, session: Session) -> dict[str, Any]:
        return session.run.manifest().get(self.name) or {}

    def remember(self, session: Session, record: dict[str, Any], **fields: Any) -> None:
        """Write ``record`` under this scheduler's key (and ``fields`` at the top) into the manifest."""
        manifest = session.run.manifest()
        manifest[self.name] = record
        manifest.update(fields)
        session.run.write_manifest(manifest)

    def __repr__(self) -> str:
        return f"<scheduler {self.name}>"


STATIC = "static"
"""The scheduler of a cluster file without a scheduler block: the nodes it lists."""

SHIPPED: dict[str, str] = {STATIC: "cvs_tasks.lifecycle.static_nodes:STATIC_NODES",
                           "slurm": "cvs_tasks.lifecycle.slurm_nodes:SLURM"}
"""The schedulers that come with the harness, by name (loaded when first asked for)."""

_REGISTRY: dict[str, Scheduler] = {}


def register(scheduler: Scheduler) -> Scheduler:
    """Add a scheduler; a second one under a name already taken is a programming error."""
    if scheduler.name in _REGISTRY or scheduler.name in SHIPPED:
        raise ValueError(f"scheduler {scheduler.name!r} is already registered")
    _REGISTRY[scheduler.name] = scheduler
    return scheduler


def unregister(name: str) -> None:
    """Drop a registered scheduler (tests that add one take it away again); the shipped ones stay."""
    if name not in SHIPPED:
        _REGISTRY.pop(name, None)


def names() -> tuple[str, ...]:
    return (*SHIPPED, *(n for n in _REGISTRY if n not in SHIPPED))


def block_names() -> tuple[str, ...]:
    """The values a cluster file's ``scheduler.name`` may take (the static one has no block)."""
    return tuple(n for n in names() if n != STATIC)


def get(name: str) -> Scheduler:
    """The scheduler called ``name`` (a shipped one is imported now); BadInput naming the known ones otherwise."""
    if name not in _REGISTRY and name in SHIPPED:
        module, _, attribute = SHIPPED[name].partition(":")
        _REGISTRY[name] = getattr(importlib.import_module(module), attribute)
    scheduler = _REGISTRY.get(name)
    if scheduler is None:
        raise BadInput(f"unknown scheduler {name!r} (known: {', '.join(block_names())})")
    return scheduler


def for_cluster(cluster: Cluster) -> Scheduler:
    """The scheduler a cluster file names, the static one when it has no scheduler block."""
    return get(cluster.scheduler.name if cluster.scheduler is not None else STATIC)
