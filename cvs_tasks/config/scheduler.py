"""The cluster file's ``scheduler`` block: nodes handed out by Slurm instead of a static list.

With it the harness attaches to the allocation it runs in (``SLURM_JOB_ID``) or requests one
(``salloc --no-shell``), runs its node commands as ``srun`` steps and releases what it requested.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cvs_tasks import runtimes
from cvs_tasks.config.validation import one_of

_TIME = re.compile(r"\A(?:\d+-)?\d{1,2}(?::\d{2}){0,2}\Z|\A\d+\Z|\AUNLIMITED\Z|\Ainfinite\Z")
_NAME = re.compile(r"\A[A-Za-z0-9_.,\[\]-]+\Z")
SchedulerContainer = one_of(runtimes.scheduler_values)  # names the runtime it runs (cvs_tasks.runtimes)


class SchedulerSpec(BaseModel):
    """Slurm settings; each maps to the ``salloc`` option of the same name."""

    model_config = ConfigDict(extra="forbid")

    name: Literal["slurm"] = Field(description="The scheduler; only slurm is known.")
    nodes: int | None = Field(None, ge=1, le=4096, description="How many nodes to request (default: the "
                                                               "node_dict size, or all of SLURM_JOB_ID's).")
    partition: str | None = Field(None, description="Slurm partition (salloc --partition).")
    account: str | None = Field(None, description="Slurm account (salloc --account).")
    reservation: str | None = Field(None, description="Slurm reservation (salloc --reservation).")
    time: str | None = Field(None, description="Time limit of a requested allocation, e.g. 00:30:00.")
    nodelist: str | None = Field(None, description="Nodes to request, e.g. gpu[01-04] (salloc --nodelist).")
    exclude: str | None = Field(None, description="Nodes never to use (salloc --exclude).")
    container: SchedulerContainer = Field(
        runtimes.get(runtimes.DEFAULT).scheduler_container,
        description="docker run on each node, pyxis (srun --container-image) or none (on the node).")
    job_id: str | None = Field(None, description="Attach to this running allocation (default: $SLURM_JOB_ID).")
    job_name: str = Field("cvs-tasks", description="Name of a requested allocation.")
    allocation_wait_s: int = Field(300, ge=1, le=86400,
                                   description="How long to wait for a requested allocation to start.")
    slurm_conf: str | None = Field(None, description="SLURM_CONF for the client commands (default: Slurm's own).")
    drain_failed: bool = Field(False, description="Drain nodes judged bad (default: only print the scontrol line).")

    @field_validator("time")
    @classmethod
    def _time(cls, value: str | None) -> str | None:
        if value is not None and not _TIME.match(value.strip()):
            raise ValueError(f"{value!r} is not a Slurm time (minutes, MM:SS, HH:MM:SS or D-HH:MM:SS)")
        return value

    @field_validator("partition", "account", "reservation", "nodelist", "exclude", "job_name")
    @classmethod
    def _word(cls, value: str | None) -> str | None:
        if value is not None and not _NAME.match(value):
            raise ValueError(f"{value!r}: use letters, digits and _ . , - [ ] only")
        return value

    @field_validator("job_id")
    @classmethod
    def _job_id(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"\d+", value):
            raise ValueError(f"{value!r} is not a Slurm job id (digits)")
        return value
