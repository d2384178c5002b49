"""The testbed's own line to its dockerd daemons, through the docker SDK.

The testbed owns each daemon's socket, so it talks to it directly: readiness, the test image,
the leftover listing by label that tests use to prove a teardown, and the wipe at `testbed.down`.
The harness under test never comes here: it reaches every node (the local one too) through the
docker CLI on the node's own connection, exactly as on a real cluster (README, "Design").

Every call is bounded by the client's request timeout; a daemon that does not answer is an
`InfraError` naming the socket, or `False` where the question is "is it up?". A missing
container or image is docker's own `NotFound`, or `None`/`False` where that is the question.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from cvs_tasks.errors import BadInput, InfraError

try:
    import docker
    from docker.constants import MINIMUM_DOCKER_API_VERSION
    from docker.errors import DockerException, ImageNotFound, NotFound
except ImportError:
    raise BadInput("the testbed talks to its dockerd daemons through the docker SDK, which is not "
                   "installed: pip install -e '.[testbed]'") from None

REQUEST_TIMEOUT_S = 60
PING_TIMEOUT_S = 2


def socket_url(sock_path: Path) -> str:
    return f"unix://{sock_path}"


@contextmanager
def client(docker_host: str, timeout: float = REQUEST_TIMEOUT_S,
           version: str | None = None) -> Iterator[docker.DockerClient]:
    """A client of one daemon (`unix:///…`), closed on exit; connection failures become InfraError.
    Without `version` the SDK first asks the daemon for its API version (one more request)."""
    try:
        api = docker.DockerClient(base_url=docker_host, timeout=timeout, version=version)
    except (DockerException, OSError) as exc:
        raise InfraError(f"dockerd at {docker_host} does not answer: {exc}") from None
    try:
        yield api
    except NotFound:
        raise
    except (DockerException, OSError) as exc:
        raise InfraError(f"dockerd at {docker_host}: {exc}") from None
    finally:
        api.close()


def ping(docker_host: str, timeout: float = PING_TIMEOUT_S) -> bool:
    """True when the daemon answers `/_ping` within `timeout`: one request per call (the oldest API
    version every daemon still serves, so no version lookup first)."""
    try:
        with client(docker_host, timeout, version=MINIMUM_DOCKER_API_VERSION) as api:
            return bool(api.ping())
    except InfraError:
        return False


def container_names(docker_host: str, *, label: str | None = None, name: str | None = None) -> list[str]:
    """Names of the daemon's containers, running or not, optionally only those with `label`
    (`key` or `key=value`) or exactly this name."""
    filters: dict[str, str] = {}
    if label:
        filters["label"] = label
    if name:
        filters["name"] = f"^{name}$"
    with client(docker_host) as api:
        return sorted(c.name for c in api.containers.list(all=True, filters=filters))


def container_attrs(docker_host: str, name: str) -> dict | None:
    """`docker inspect` of one container, or None when it does not exist."""
    try:
        with client(docker_host) as api:
            return api.containers.get(name).attrs
    except NotFound:
        return None


def kill(docker_host: str, name: str) -> None:
    """SIGKILL one container (what an OOM killer or a crashed node does to it)."""
    with client(docker_host) as api:
        api.containers.get(name).kill()


def remove_all(docker_host: str) -> list[str]:
    """Force-remove every container of the daemon; returns their names."""
    removed = []
    with client(docker_host, timeout=120) as api:
        for found in api.containers.list(all=True):
            try:
                found.remove(force=True)
            except NotFound:
                pass                      # gone on its own in the meantime
            removed.append(found.name)
    return removed


def has_image(docker_host: str, name: str) -> bool:
    try:
        with client(docker_host) as api:
            api.images.get(name)
            return True
    except (ImageNotFound, NotFound):
        return False


def import_image(docker_host: str, tar_path: Path, name: str, changes: list[str], timeout: float) -> None:
    """`docker import` of a root-filesystem tarball as `name` (`repo:tag`), with Dockerfile `changes`.

    The daemon reports a failed import inside a 200 answer, so the image is looked up afterwards."""
    repository, _, tag = name.rpartition(":")
    with client(docker_host, timeout=timeout) as api:
        answer = api.api.import_image(src=str(tar_path), repository=repository, tag=tag, changes=changes)
    if not has_image(docker_host, name):
        raise InfraError(f"docker import of {tar_path} into {docker_host} left no image {name}: {answer!s:.300}")


def tag(docker_host: str, name: str, target: str) -> None:
    repository, _, version = target.rpartition(":")
    try:
        with client(docker_host) as api:
            tagged = api.images.get(name).tag(repository, version)
    except NotFound:
        raise InfraError(f"dockerd at {docker_host} has no image {name} to tag as {target}") from None
    if not tagged:
        raise InfraError(f"dockerd at {docker_host} refused to tag {name} as {target}")
