"""Training backends (Megatron-LM, Primus, ...): the ``Backend`` interface and its registry.

A backend is everything the harness knows that differs between trainers: which images it runs,
how a job's launch is built, whether the tokenizer stage may download a file for it, whether its
jobs need the Broadcom NIC set-up, what its launcher is asked before a run and which launch
contracts are refused at load, what its wrapper asks the trainer for (read back from the
arguments dump), the reference suite's aggregation of its numbers, its memory gate and whether
the checkpoint test applies. Code elsewhere asks the backend (``get(name)``) instead of comparing
its name; a new backend is one module that subclasses ``Backend`` and calls ``register``
(``tests/unit/test_backend_added.py`` adds one and runs the whole lifecycle with it).

Layers: the config layer asks this registry which backend an image is, so this module imports
nothing of the harness. A shipped backend is one module in the jobs layer, next to the launch it
builds (``cvs_tasks/jobs/megatron.py``, ``cvs_tasks/jobs/primus.py``), and imports what it uses;
the registry names those modules (``SHIPPED``, as ``"module:object"``, the way ``runtimes`` names
its container classes) and loads them the first time it is asked.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from cvs_tasks.errors import BadInput

if TYPE_CHECKING:
    from cvs_tasks.config import Suite
    from cvs_tasks.config.errors import Problem
    from cvs_tasks.families import ModelSize
    from cvs_tasks.jobs.contracts import Need
    from cvs_tasks.jobs.spec import JobSpec, LaunchPlan
    from cvs_tasks.lifecycle.session import Session


class Backend(ABC):
    """One trainer the harness can run. Subclasses set the names and override what differs."""

    name: str  # registry key: Suite.backend, JobSpec.backend, the node's `<name>-logs` folder
    label: str  # what people read: the manifest, the report, `config.validate`
    dialect: str  # the log dialect its training logs are written in (metrics.parser.DIALECTS)
    fallback: bool = False  # runs every image no other backend claims (exactly one backend is the fallback)
    # the tokenizer stage may download tokenizer.model for it (the families whose launcher needs the file);
    # without it the stage is skipped, saying: "<label> <tokenizer_note>"
    local_tokenizer: bool = False
    tokenizer_note: str = "takes the tokenizer by its HF repo id"
    broadcom_nic_setup: bool = False  # distributed jobs on Broadcom/Thor NICs copy the host's libbnxt first
    checkpoint_test: bool = False  # its launch saves and resumes (JobSpec.save_dir / load_dir): the test runs
    # an optional training.mem_usage spec is recorded, not gated (its memory figure is not what the
    # shipped specs were calibrated on)
    memory_record_only: bool = False

    @abstractmethod
    def matches(self, image: str) -> bool:
        """Does ``container.image`` hold this trainer (the fallback's answer is not asked)?"""

    @abstractmethod
    def build_launch(self, job: JobSpec, experiment: str | None) -> LaunchPlan:
        """Every node's wrapper script and launch command; raises JobSetupError when none can be built."""

    def experiment(self, session: Session, job: JobSpec) -> str | None:
        """The experiment file the launch names, found in the image before the job (I/O); None: none."""
        return None

    def size_problem(self, what: str, size: ModelSize) -> str | None:
        """Why a model size (a family row's ``ModelSize``; ``what`` names it for the message) cannot run
        on this backend's images (None: it can)."""
        return None

    def contract_problems(self, suite: Suite, *, distributed: bool) -> list[Problem]:
        """What its launchers cannot do as configured, refused at load (exit 2)."""
        return []

    def launcher_needs(self, suite: Suite, *, distributed: bool) -> list[Need]:
        """What the image's launcher and the nodes must confirm before the run (the launcher probe)."""
        return []

    def asked(self, job: JobSpec) -> dict[str, Any]:
        """What its wrapper asks the trainer for beyond the sizes every backend passes, as
        ``verify.compare.Asked`` fields: ``launcher`` and ``script`` name a mismatch's likely cause."""
        return {"launcher": self.name, "script": self.name}

    def reference_numbers(self, iterations: Sequence[Any], summary: Mapping[str, float]) -> dict[str, dict]:
        """The reference suite's aggregation of a training log (``judge.reference``); {}: it has none."""
        return {}

    def __repr__(self) -> str:
        return f"<backend {self.name}>"


SHIPPED: tuple[str, ...] = ("cvs_tasks.jobs.megatron:MEGATRON", "cvs_tasks.jobs.primus:PRIMUS")
"""The backends that come with the harness, in registration (and so detection) order."""

_REGISTRY: dict[str, Backend] = {}
_shipped_loaded = False


def named(reference: str) -> Any:
    """The object a ``"module:name"`` reference names (the module is imported now)."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


def _registry() -> dict[str, Backend]:
    """Every registered backend, the shipped ones first (loaded on the first call)."""
    global _shipped_loaded
    if not _shipped_loaded:
        _shipped_loaded = True  # first: a shipped module that asks while it loads sees what is there so far
        for reference in SHIPPED:
            _add(named(reference))
    return _REGISTRY


def _add(backend: Backend) -> Backend:
    if backend.name in _REGISTRY:
        raise ValueError(f"backend {backend.name!r} is already registered")
    if backend.fallback and any(b.fallback for b in _REGISTRY.values()):
        raise ValueError(f"backend {backend.name!r}: {fallback().name!r} is already the fallback")
    _REGISTRY[backend.name] = backend
    return backend


def register(backend: Backend) -> Backend:
    """Add a backend; a second one under the same name, or a second fallback, is a programming error."""
    _registry()
    return _add(backend)


def unregister(name: str) -> None:
    """Drop a backend (tests that add one take it away again)."""
    _registry().pop(name, None)


def names() -> tuple[str, ...]:
    return tuple(_registry())


def all_backends() -> tuple[Backend, ...]:
    return tuple(_registry().values())


def find(name: str) -> Backend | None:
    return _registry().get(name)


def get(name: str) -> Backend:
    """The backend called ``name``; BadInput (exit 2) naming the known ones otherwise."""
    backend = _registry().get(name)
    if backend is None:
        raise BadInput(f"unknown backend {name!r} (known: {', '.join(names())})")
    return backend


def fallback() -> Backend:
    return next(b for b in _registry().values() if b.fallback)


def backend_for_image(image: str) -> Backend:
    """The first registered backend that claims ``image``, else the fallback."""
    for backend in _registry().values():
        if not backend.fallback and backend.matches(image):
            return backend
    return fallback()


def for_dialect(dialect: str | None) -> Backend | None:
    """The first registered backend whose logs are written in ``dialect``."""
    return next((b for b in _registry().values() if b.dialect == dialect), None) if dialect else None


def labels_with(attribute: str) -> str:
    """``"Primus"`` or ``"A / B"``: the labels of the backends that have ``attribute`` set."""
    return " / ".join(b.label for b in _registry().values() if getattr(b, attribute)) or "no backend"
