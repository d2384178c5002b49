"""The cluster file: which hosts, how to reach them, optional container defaults, or a scheduler.

`node_dict` is a dict (host -> settings) or a list (`{"mgmt_ip": ...}` or plain strings). A host
that is the machine the harness runs on (`{"local": true}`, or `localhost` with no other setting)
needs no SSH.

The ``scheduler`` block hands out the nodes through Slurm instead of a static list: the harness
attaches to the allocation it runs in (``SLURM_JOB_ID``) or requests one (``salloc --no-shell``),
runs its node commands as ``srun`` steps and releases what it requested.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cvs_tasks import runtimes, schedulers
from cvs_tasks.config.errors import ConfigError, Problem, is_under, join_path, one_of, read_object, validate_model
from cvs_tasks.config.placeholders import (
    USER_ID,
    changeme_hint,
    find_changeme,
    local_user,
    strip_comments,
    substitute_user,
)
from cvs_tasks.identifiers import identifier_problem

LOCAL_NAMES = ("localhost",)


# --- the scheduler block ------------------------------------------------------------------------
_TIME = re.compile(r"\A(?:\d+-)?\d{1,2}(?::\d{2}){0,2}\Z|\A\d+\Z|\AUNLIMITED\Z|\Ainfinite\Z")
_NAME = re.compile(r"\A[A-Za-z0-9_.,\[\]-]+\Z")
SchedulerContainer = one_of(runtimes.scheduler_values)  # names the runtime it runs (cvs_tasks.runtimes)
SchedulerName = one_of(schedulers.block_names)  # a registered scheduler (cvs_tasks.schedulers)


class SchedulerSpec(BaseModel):
    """Slurm settings; each maps to the ``salloc`` option of the same name."""

    model_config = ConfigDict(extra="forbid")

    name: SchedulerName = Field(description="The scheduler (cvs_tasks.schedulers); slurm ships.")
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


# --- the cluster file ---------------------------------------------------------------------------


@dataclass(frozen=True)
class HostSpec:
    name: str
    address: str
    port: int = 22
    local: bool = False


@dataclass
class Cluster:
    path: Path
    username: str
    priv_key_file: str | None
    hosts: list[HostSpec]
    container: dict[str, Any] = field(default_factory=dict)
    known_hosts: str | None = None
    scheduler: SchedulerSpec | None = None
    fanout_window: int = 32

    @property
    def host_names(self) -> list[str]:
        return [h.name for h in self.hosts]


class _Node(BaseModel):
    model_config = ConfigDict(extra="forbid")

    address: str | None = Field(None, description="Where to SSH; default: the node_dict key.")
    port: int = Field(22, ge=1, le=65535, description="SSH port.")
    local: bool = Field(False, description="This host is the machine the harness runs on (no SSH).")
    mgmt_ip: str | None = Field(None, description="In the list form of node_dict: the host to reach.")
    vpc_ip: str | None = Field(None, description="Accepted for reference files; unused.")
    bmc_ip: str | None = Field(None, description="Accepted for reference files; unused.")


class _ClusterFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    username: str | None = Field(None, description="SSH user on every node; {user-id} is the local user.")
    priv_key_file: str | None = Field(None, description="Private key for SSH (password login is not supported).")
    node_dict: Any = Field(None, description="host -> settings, or a list of {mgmt_ip: host} / host strings.")
    scheduler: SchedulerSpec | None = Field(None, description="Nodes from a Slurm allocation instead of SSH.")
    known_hosts: str | None = Field(None, description="known_hosts file with the nodes' host keys "
                                                      "(default ~/.ssh/known_hosts).")
    container: dict[str, Any] = Field(default_factory=dict, description="Container defaults merged under every "
                                                                        "suite config's container block.")
    password: Any = Field(None, description="Not supported: leave it unset (null in JSON); SSH uses priv_key_file.")
    fanout_window: int = Field(32, ge=1, le=1024, description="SSH nodes that connect or start a command at once "
                                                            "(like pdsh's 32); keep it within sshd's MaxStartups.")
    head_node_dict: dict[str, Any] = Field(default_factory=dict, description="Accepted for reference files; unused.")
    env_vars: dict[str, Any] = Field(default_factory=dict, description="Accepted for reference files; unused.")
    orchestrator: str | None = Field(None, description="Accepted for reference files; unused.")


def load_cluster(path: Path | str) -> Cluster:
    """Read and check a cluster file; every problem is reported at once as a ConfigError."""
    path = Path(path)
    raw, _ = read_object(path, "cluster")
    return parse_cluster(raw, path)


def parse_cluster(raw: dict[str, Any], path: Path, user: str | None = None) -> Cluster:
    """The Cluster described by `raw` (already parsed JSON); `user` replaces `{user-id}`."""
    username = raw.get("username")
    if isinstance(username, str) and username != USER_ID and identifier_problem("user name", username):
        raise ConfigError(path, [("username", identifier_problem("user name", username))])
    data = substitute_user(strip_comments(raw), user or local_user())
    problems: list[Problem] = [
        (where, changeme_hint(where, text)) for where, text in find_changeme(data, keys_too=True)
    ]
    blocked = {where for where, _ in problems}
    model, model_problems = validate_model(_ClusterFile, data)
    if data.get("password") is not None:
        model_problems.append(("password", "password login is not supported; set it to null and use priv_key_file"))
    scheduled = isinstance(data.get("scheduler"), dict)
    if data.get("node_dict") is not None:
        hosts, host_problems = _hosts(data["node_dict"])
    else:
        hosts, host_problems = [], [] if scheduled else [("node_dict", "required key is missing")]
    problems += [p for p in model_problems + host_problems if not is_under(p[0], blocked)]
    if not scheduled:
        local_only = bool(hosts) and all(h.local for h in hosts)
        for key in ("username", "priv_key_file"):  # a key may be left out where null is allowed (TOML has no null)
            if key not in data and not (key == "priv_key_file" and local_only):
                problems.append((key, "required key is missing"))
        if model and "priv_key_file" in data and not model.priv_key_file and not all(h.local for h in hosts):
            problems.append(("priv_key_file", "required: the SSH key used to reach the (non-local) hosts"))
    if model and model.scheduler:
        problems += _scheduler_problems(model.scheduler, hosts)
    if problems:
        raise ConfigError(path, problems)
    assert model is not None
    return Cluster(path=path, username=model.username or local_user(), priv_key_file=model.priv_key_file or None,
                   hosts=hosts, container=model.container, known_hosts=model.known_hosts,
                   scheduler=model.scheduler, fanout_window=model.fanout_window)


def _scheduler_problems(spec: SchedulerSpec, hosts: list[HostSpec]) -> list[Problem]:
    """With a scheduler, node_dict (when given) names the nodes to request and must agree with nodes."""
    problems: list[Problem] = []
    if hosts and spec.nodelist:
        problems.append(("scheduler.nodelist", "give either scheduler.nodelist or node_dict, not both"))
    if hosts and spec.nodes is not None and spec.nodes != len(hosts):
        problems.append(("scheduler.nodes", f"{spec.nodes} does not match the {len(hosts)} host(s) in node_dict"))
    if any(h.local for h in hosts):
        problems.append(("node_dict", "local hosts cannot be combined with a scheduler"))
    if not hosts and spec.nodes is None:
        problems.append(("scheduler.nodes", "required: how many nodes to run on (or list them in node_dict)"))
    return problems


def _hosts(node_dict: Any) -> tuple[list[HostSpec], list[Problem]]:
    """Hosts in file order; dict keys are host names, list entries name themselves by mgmt_ip/address."""
    problems: list[Problem] = []
    entries: list[tuple[str, _Node, str]] = []
    if isinstance(node_dict, dict):
        items = [(name, value, join_path("node_dict", name)) for name, value in node_dict.items()]
    elif isinstance(node_dict, list):
        items = [(None, value, join_path("node_dict", i)) for i, value in enumerate(node_dict)]
    else:
        return [], [("node_dict", "must be an object {host: {...}} or a list of hosts")]
    for name, value, where in items:
        if isinstance(value, str) and name is None:
            value = {"mgmt_ip": value}
        node, node_problems = validate_model(_Node, value if value is not None else {}, where)
        problems += node_problems
        if node is None:
            continue
        host = name if name is not None else (node.mgmt_ip or node.address or "")
        if not host.strip():
            problems.append((where, "needs mgmt_ip (or address): the host to reach"))
            continue
        entries.append((host, node, where))
    if not items:
        problems.append(("node_dict", "lists no hosts; add at least one"))
    hosts: list[HostSpec] = []
    seen: dict[str, str] = {}
    for name, node, where in entries:
        if name in seen:
            problems.append((where, f"host {name!r} is listed twice (also {seen[name]})"))
            continue
        seen[name] = where
        bad = [identifier_problem("host", h) for h in dict.fromkeys((name, node.address or name))]
        if any(bad):  # host names reach ssh, known_hosts lines and scripts
            problems.append((where, next(b for b in bad if b)))
            continue
        local = node.local or (name in LOCAL_NAMES and not node.model_fields_set)
        hosts.append(HostSpec(name=name, address=node.address or name, port=node.port, local=local))
    return hosts, problems


def resolved_username(cluster: Cluster | None) -> str | None:
    """The cluster's username for `{user-id}` in the suite config, unless it is still the literal token."""
    if cluster is None or not cluster.username or cluster.username == USER_ID:
        return None
    return cluster.username
