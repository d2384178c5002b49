"""Pure Docker CLI command builders; what they return is exactly what runs on a node.

The container spec is read from the suite's ``container`` block (a pydantic model or a plain
dict). The ``docker run`` line holds what is configured plus the container defaults RDMA and
large-model training need (`cvs_tasks.config.container_defaults`: the config wins, nothing
twice, ``omit_defaults`` leaves one out). ``NNODES`` comes from the host count; secrets never go on a line (the
registry password is redirected from a file on the node, the HF token travels as a file).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from cvs_tasks import runtimes
from cvs_tasks.config.container_defaults import merge_defaults
from cvs_tasks.errors import BadInput
from cvs_tasks.identifiers import identifier_problem, looks_like_secret_env

LABEL_RUN_ID = "cvs.run_id"
LABEL_OWNER = "cvs.owner"
LABEL_NAME = "cvs.name"
LIFETIMES = ("per_run", "persistent", "no_launch")


@dataclass(frozen=True)
class Registry:
    username: str
    password_file: str
    server: str | None = None


@dataclass(frozen=True)
class RuntimeArgs:
    network: str | None = None
    ipc: str | None = None
    privileged: bool = False
    shm_size: str | None = None
    volumes: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    cap_add: tuple[str, ...] = ()
    security_opt: tuple[str, ...] = ()
    group_add: tuple[str, ...] = ()
    ulimit: tuple[str, ...] = ()
    registry: Registry | None = None


@dataclass(frozen=True)
class ContainerSpec:
    """The parts of ``container`` the runtime needs, normalised."""

    name: str
    image: str
    lifetime: str = "per_run"
    runtime: str = runtimes.DEFAULT
    image_tar: str | None = None
    args: RuntimeArgs = field(default_factory=RuntimeArgs)
    env: tuple[tuple[str, str], ...] = ()


def _plain(obj: Any) -> Any:
    """A pydantic model or dataclass-ish object as plain dicts/lists."""
    if hasattr(obj, "model_dump"):
        return obj.model_dump()
    return obj


def _get(obj: Any, key: str, default: Any = None) -> Any:
    obj = _plain(obj)
    if isinstance(obj, Mapping):
        value = obj.get(key, default)
    else:
        value = getattr(obj, key, default)
    return default if value is None else value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Mapping):  # e.g. ulimit {"memlock": -1}
        return tuple(f"{k}={v}" for k, v in value.items())
    try:
        return tuple(str(v) for v in value)
    except TypeError:
        raise BadInput(f"container {where}: expected a list of strings, got {value!r}") from None


def container_spec(container: Any) -> ContainerSpec:
    """Normalise the suite's (or cluster's merged) ``container`` block; BadInput says which key."""
    runtime = _get(container, "runtime", {})
    args = _get(runtime, "args", {})
    name = str(_get(runtime, "name", runtimes.DEFAULT))
    kind = runtimes.find(name)  # an unknown name is refused by runtime_for, naming the known ones
    if kind is not None and kind.node_docker:  # docker run options: the defaults apply
        args = merge_defaults(_plain(args))[0]
    registry = _get(args, "registry")
    reg = None
    if registry:
        reg = Registry(str(_get(registry, "username", "")), str(_get(registry, "password_file", "")),
                       _get(registry, "server"))
        if not reg.username or not reg.password_file:
            raise BadInput("container.runtime.args.registry: needs username and password_file")
    env = _get(container, "env", {})
    if not isinstance(env, Mapping):
        raise BadInput(f"container.env: expected a mapping of names to strings, got {env!r}")
    spec = ContainerSpec(
        name=str(_get(container, "name", "")),
        image=str(_get(container, "image", "")),
        lifetime=str(_get(container, "lifetime", "per_run")),
        runtime=name,
        image_tar=_get(container, "image_tar"),
        args=RuntimeArgs(
            network=_get(args, "network"), ipc=_get(args, "ipc"),
            privileged=bool(_get(args, "privileged", False)), shm_size=_get(args, "shm_size"),
            volumes=_strings(_get(args, "volumes"), "runtime.args.volumes"),
            devices=_strings(_get(args, "devices"), "runtime.args.devices"),
            cap_add=_strings(_get(args, "cap_add"), "runtime.args.cap_add"),
            security_opt=_strings(_get(args, "security_opt"), "runtime.args.security_opt"),
            group_add=_strings(_get(args, "group_add"), "runtime.args.group_add"),
            ulimit=_strings(_get(args, "ulimit"), "runtime.args.ulimit"),
            registry=reg,
        ),
        env=tuple((str(k), str(v)) for k, v in env.items()),
    )
    _validate(spec)
    return spec


def with_env(spec: ContainerSpec, overrides: Mapping[str, str]) -> ContainerSpec:
    """The spec with ``overrides`` replacing (or added to) its env, order kept."""
    env = dict(spec.env)
    env.update(overrides)
    return replace(spec, env=tuple(env.items()))


def _validate(spec: ContainerSpec) -> None:
    problems = []
    if spec.lifetime not in LIFETIMES:
        problems.append(f"container.lifetime: {spec.lifetime!r} is not one of {', '.join(LIFETIMES)}")
    kind = runtimes.find(spec.runtime)
    if kind is not None and kind.named_container:
        if not spec.name:
            problems.append(f"container.name: required for the {spec.runtime} runtime")
        if not spec.image:
            problems.append(f"container.image: required for the {spec.runtime} runtime")
        # a name or image starting with '-' would become a docker flag (`--privileged`)
        for key, kind, value in (("name", "container name", spec.name), ("image", "image", spec.image)):
            problem = identifier_problem(kind, value) if value else None
            if problem:
                problems.append(f"container.{key}: {problem}")
    registry = spec.args.registry
    if registry is not None:  # both reach `docker login` as words: a leading '-' would be a flag
        for key, kind, value in (("username", "user name", registry.username), ("server", "registry", registry.server)):
            problem = identifier_problem(kind, value) if value else None
            if problem:
                problems.append(f"container.runtime.args.registry.{key}: {problem}")
    for key, _ in spec.env:
        if looks_like_secret_env(key):
            problems.append(f"container.env.{key}: looks like a secret; env values go on the docker "
                            "command line and into `docker inspect` — pass it as a file instead "
                            "(paths.hf_token_file for the HF token)")
    targets: dict[str, str] = {}
    for volume in _unique(spec.args.volumes):
        parts = volume.split(":")
        target = parts[1] if len(parts) > 1 else parts[0]
        if target in targets and targets[target] != volume:
            problems.append(f"container.runtime.args.volumes: {targets[target]!r} and {volume!r} "
                            f"both mount onto {target}")
        targets[target] = volume
    if problems:
        raise BadInput("container settings are not usable:\n  " + "\n  ".join(problems))


def _unique(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)


def _unique_by_name(items: Iterable[str]) -> list[str]:
    """ulimit entries keyed by their name; a later entry replaces an earlier one in place."""
    by_name: dict[str, str] = {}
    for item in items:
        by_name[item.split("=", 1)[0]] = item
    return list(by_name.values())


def run_argv(spec: ContainerSpec, *, run_id: str, owner: str, nnodes: int) -> list[str]:
    """``docker run -d`` for the long-lived container the jobs exec into."""
    a = spec.args
    argv = ["docker", "run", "-d", "--name", spec.name,
            "--label", f"{LABEL_RUN_ID}={run_id}", "--label", f"{LABEL_OWNER}={owner}",
            "--label", f"{LABEL_NAME}={spec.name}"]
    if a.network:
        argv += ["--network", a.network]
    if a.ipc:
        argv += ["--ipc", a.ipc]
    if a.privileged:
        argv.append("--privileged")
    if a.shm_size:
        argv += ["--shm-size", str(a.shm_size)]
    for flag, values in (("--device", _unique(a.devices)), ("-v", _unique(a.volumes)),
                         ("--cap-add", _unique(a.cap_add)),
                         ("--security-opt", _unique(a.security_opt)),
                         ("--group-add", _unique(a.group_add)),
                         ("--ulimit", _unique_by_name(a.ulimit))):
        for value in values:
            argv += [flag, value]
    env = {k: v for k, v in spec.env if k != "NNODES"}
    env["NNODES"] = str(nnodes)
    for key, value in env.items():
        argv += ["-e", f"{key}={value}"]
    argv += [spec.image, "sleep", "infinity"]
    return argv


def run_command(spec: ContainerSpec, *, run_id: str, owner: str, nnodes: int) -> str:
    return shlex.join(run_argv(spec, run_id=run_id, owner=owner, nnodes=nnodes))


def image_present_command(image: str) -> str:
    return shlex.join(["docker", "image", "inspect", "--format", "{{.Id}}", image])


def pull_command(image: str) -> str:
    return shlex.join(["docker", "pull", image])


def load_command(tar_path: str) -> str:
    return shlex.join(["docker", "load", "-i", tar_path])


def login_command(registry: Registry) -> str:
    """Password from the file on the node, through stdin: it never appears in a command line."""
    argv = ["docker", "login", "--username", registry.username, "--password-stdin"]
    if registry.server:
        argv.append(registry.server)
    return f"{shlex.join(argv)} < {shlex.quote(registry.password_file)}"


def remove_command(*names: str) -> str:
    if not names:
        raise ValueError("remove_command needs at least one container name")
    return shlex.join(["docker", "rm", "-f", *names])


# Removing a container by name at launch, roll-back and teardown: only when it is absent, not
# running, or this run's own (its cvs.run_id label). A running container of another run (a second
# engineer's run of the same config on the same nodes) or one cvs-tasks did not label is never
# removed: the node answers IN_USE_EXIT with a line naming the run that holds it.
IN_USE_EXIT = 3
IN_USE_MARK = "cvs-tasks: in use:"
_OWN_FORMAT = '{{.State.Status}} {{index .Config.Labels "' + LABEL_RUN_ID + '"}} {{index .Config.Labels "' \
    + LABEL_OWNER + '"}}'


def remove_own_command(name: str, run_id: str) -> str:
    """``docker rm -f <name>`` unless the container runs for another run (or for no cvs-tasks run):
    then exit ``IN_USE_EXIT`` with ``IN_USE_MARK <status> <its run id> <its owner>`` on stderr.
    An absent container exits 0 (nothing to remove); a failed inspect (docker down) fails as it."""
    n, own = shlex.quote(name), shlex.quote(run_id)
    return (f"(set -f; s=$(docker container inspect --format {shlex.quote(_OWN_FORMAT)} {n} 2>&1) || "
            f"{{ case \"$s\" in *'o such container'*|*'o such object'*) exit 0;; esac; "
            f"printf '%s\\n' \"$s\" >&2; exit 1; }}; "
            f"set -- $s; if [ \"$1\" = running ] && [ \"${{2:-}}\" != {own} ]; then "
            f"echo \"{IN_USE_MARK} $*\" >&2; exit {IN_USE_EXIT}; fi; "
            f"{shlex.join(['docker', 'rm', '-f', name])})")


def in_use_by(stderr: str) -> tuple[str, str] | None:
    """(run id, owner) of the other run a ``remove_own_command`` refused to touch, else None;
    ('', '') for a running container no cvs-tasks run labelled."""
    for line in stderr.splitlines():
        if line.startswith(IN_USE_MARK):
            fields = line[len(IN_USE_MARK):].split()[1:] + ["", ""]
            run, owner = ("" if f == "<no value>" else f for f in fields[:2])
            return run, owner
    return None


STATE_FORMAT = "{{.State.Status}}"


def state_command(name: str) -> str:
    """Prints ``running``/``exited``/...; exits non-zero with 'No such container' when absent."""
    return shlex.join(["docker", "container", "inspect", "--format", STATE_FORMAT, name])


LEFTOVER_FORMAT = ('{{.Names}}\t{{.State}}\t{{.Label "cvs.run_id"}}\t{{.Label "cvs.owner"}}'
                   '\t{{.Label "cvs.name"}}')


def list_labelled_command(run_id: str | None = None, owner: str | None = None) -> str:
    """Every container (running or not) carrying our labels, optionally one run's or one owner's."""
    argv = ["docker", "ps", "-a", "--filter",
            f"label={LABEL_RUN_ID}" + (f"={run_id}" if run_id else "")]
    if owner:
        argv += ["--filter", f"label={LABEL_OWNER}={owner}"]
    argv += ["--format", LEFTOVER_FORMAT]
    return shlex.join(argv)


def exec_command(name: str, command: str) -> str:
    """``docker exec <name> bash -lc '<command>'``: the command is one quoted argument."""
    return shlex.join(["docker", "exec", name, "bash", "-lc", command])


def host_shell_command(command: str) -> str:
    """The host runtime's equivalent of exec: the same bash login shell, no container."""
    return shlex.join(["bash", "-lc", command])


VERSION_FORMAT = "{{.Server.Version}}"


def version_command() -> str:
    return shlex.join(["docker", "version", "--format", VERSION_FORMAT])


def is_missing_container(stderr: str) -> bool:
    """Docker's words for 'that container does not exist' (rm/inspect on an absent name)."""
    text = stderr.lower()
    return "no such container" in text or "no such object" in text
