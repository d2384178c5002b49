"""Container runtimes (``container.runtime.name``): each one row of properties, declared once here.

A runtime is how a job's processes are isolated on a node. What the rest of the harness needs to
know about one is a property of its row, never a test of its name: whether the job's processes
are in the node's process table, whether the wrapper exports the job's env itself, whether the
node's docker daemon holds the image and the container, which ``scheduler.container`` value of a
Slurm cluster file runs it, and which ``remote`` class runs commands through it (named as
``"module:Class"`` so this module stays importable from the config layer).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from cvs_tasks.errors import BadInput

DEFAULT = "docker"  # what a container block without runtime.name means (cluster.check, raw blocks)


@dataclass(frozen=True)
class RuntimeKind:
    name: str  # container.runtime.name
    summary: str  # one clause for the schema's description
    scheduler_container: str  # the scheduler.container value that runs it on a Slurm cluster file
    container_class: str  # "module:Class" of the remote.container.Runtime that runs commands through it
    # the job's processes are in the node's process table: the harness stops the job's own process
    # group and never kills GPU processes by pid (other users' would be listed too)
    host_pids: bool = False
    wrapper_exports_env: bool = False  # no `docker run -e`: the wrapper script exports container.env itself
    # the node's docker daemon holds the image and a named container: docker run options and their
    # defaults apply, `cluster.check` asks the daemon, the image can be inspected and read before a
    # run, labelled leftovers are found with `docker ps`, and the container's env is fixed at launch
    node_docker: bool = False
    named_container: bool = False  # a named container of container.image runs the job (both required)
    slurm_only: bool = False  # runs only as steps of a Slurm allocation

    def container_type(self) -> type:
        """The ``remote.container.Runtime`` subclass for this runtime (imported now)."""
        module, _, cls = self.container_class.partition(":")
        return getattr(importlib.import_module(module), cls)


ROWS: tuple[RuntimeKind, ...] = (
    RuntimeKind("docker", "one container per node", "docker", "cvs_tasks.remote.container:DockerRuntime",
                node_docker=True, named_container=True),
    RuntimeKind("host", "run directly on the node (no container)", "none", "cvs_tasks.remote.container:HostRuntime",
                host_pids=True, wrapper_exports_env=True),
    RuntimeKind("pyxis", "Slurm steps in a pyxis/enroot container (needs scheduler.container pyxis)", "pyxis",
                "cvs_tasks.remote.pyxis:PyxisRuntime",
                host_pids=True, wrapper_exports_env=True, named_container=True, slurm_only=True),
)
_REGISTRY: dict[str, RuntimeKind] = {}


def register(kind: RuntimeKind) -> RuntimeKind:
    if kind.name in _REGISTRY:
        raise ValueError(f"runtime {kind.name!r} is already registered")
    if any(k.scheduler_container == kind.scheduler_container for k in _REGISTRY.values()):
        raise ValueError(f"runtime {kind.name!r}: scheduler.container {kind.scheduler_container!r} is taken")
    _REGISTRY[kind.name] = kind
    return kind


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def find(name: str) -> RuntimeKind | None:
    return _REGISTRY.get(name)


def get(name: str) -> RuntimeKind:
    """The runtime called ``name``; BadInput (exit 2) naming the known ones otherwise."""
    kind = _REGISTRY.get(name)
    if kind is None:
        raise BadInput(f"container.runtime.name: {name!r} is not supported (use {spoken(names())})")
    return kind


def scheduler_values() -> tuple[str, ...]:
    return tuple(k.scheduler_container for k in _REGISTRY.values())


def for_scheduler(value: str) -> RuntimeKind:
    """The runtime a Slurm cluster file's ``scheduler.container`` value runs."""
    kind = next((k for k in _REGISTRY.values() if k.scheduler_container == value), None)
    if kind is None:
        raise BadInput(f"scheduler.container: {value!r} is not one of {spoken(scheduler_values())}")
    return kind


def over_ssh() -> tuple[str, ...]:
    """The runtimes a static node list (no scheduler) can run."""
    return tuple(k.name for k in _REGISTRY.values() if not k.slurm_only)


def spoken(words: tuple[str, ...] | list[str], quote: str = "") -> str:
    """``a, b or c`` (each word in ``quote``), as pydantic spells a choice."""
    quoted = [f"{quote}{w}{quote}" for w in words]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


for _row in ROWS:
    register(_row)
