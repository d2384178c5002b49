"""Host keys: verified against a known_hosts file, recorded only on purpose (``cluster.trust``).

Fabric's Connection accepts any key (AutoAddPolicy); SshHosts replaces that policy with
``StrictHostKeyPolicy`` before the first connect, so an unknown key is refused and a changed
key raises paramiko's BadHostKeyException. The messages here say which node, which file and
line, and what command fixes it.
"""

from __future__ import annotations

import os
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

import paramiko
from paramiko.hostkeys import HostKeyEntry, HostKeys

from cvs_tasks.remote.results import Node

if TYPE_CHECKING:  # the config package is another area; only its shape matters here
    from cvs_tasks.config import Cluster

DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"


class UnknownHostKey(paramiko.SSHException):
    """The node offered a key that the known_hosts file does not list."""

    def __init__(self, hostname: str, key: paramiko.PKey):
        super().__init__(f"host key for {hostname} not found in known_hosts")
        self.hostname = hostname
        self.key = key


class StrictHostKeyPolicy(paramiko.RejectPolicy):
    """Refuse unknown keys with an exception that carries the offered key (for the message)."""

    def missing_host_key(self, client, hostname, key):  # noqa: D102 (paramiko hook)
        raise UnknownHostKey(hostname, key)


def known_hosts_path(cluster: "Cluster | None" = None, override: str | os.PathLike | None = None) -> Path:
    """The file host keys are checked against: the flag, else the cluster's, else ~/.ssh/known_hosts.

    A relative path in the cluster file is relative to the cluster file's folder.
    """
    if override:
        return Path(override).expanduser()
    configured = getattr(cluster, "known_hosts", None) if cluster is not None else None
    if configured:
        path = Path(configured).expanduser()
        base = getattr(cluster, "path", None)
        if not path.is_absolute() and base:
            path = Path(base).parent / path
        return path
    return Path(DEFAULT_KNOWN_HOSTS).expanduser()


def host_key_name(address: str, port: int) -> str:
    """How known_hosts names a host: bare address on port 22, ``[address]:port`` otherwise."""
    return address if port == 22 else f"[{address}]:{port}"


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH-style ``SHA256:...`` fingerprint, what ``ssh-keygen -lf`` prints."""
    return key.fingerprint


def _name_matches(pattern: str, name: str) -> bool:
    if pattern.startswith("|1|"):
        return HostKeys.hash_host(name, pattern) == pattern
    return pattern == name


def find_entries(path: Path, name: str) -> list[tuple[int, HostKeyEntry]]:
    """(line number, entry) for each line of ``path`` that names ``name`` (hashed names too)."""
    if not path.is_file():
        return []
    found = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            entry = HostKeyEntry.from_line(stripped, lineno)
        except Exception:  # noqa: BLE001 - a line paramiko cannot read is not ours to judge
            continue
        if entry is not None and any(_name_matches(p, name) for p in entry.hostnames):
            found.append((lineno, entry))
    return found


def trust_hint(cluster_file: str | os.PathLike | None, replace: bool = False) -> str:
    target = f" --cluster {cluster_file}" if cluster_file else " --cluster <cluster file>"
    return f"invoke cluster.trust{target}" + (" --replace" if replace else "")


def describe_unknown_key(node: Node, exc: UnknownHostKey, known_hosts: Path,
                         cluster_file: str | os.PathLike | None) -> str:
    return (f"host key {exc.key.get_name()} {fingerprint(exc.key)} is not in {known_hosts}; "
            f"check the fingerprint and record it with `{trust_hint(cluster_file)}`")


def describe_changed_key(node: Node, exc: paramiko.BadHostKeyException, known_hosts: Path,
                         cluster_file: str | os.PathLike | None) -> str:
    name = host_key_name(node.address, node.port)
    lines = [n for n, e in find_entries(known_hosts, name)
             if e.key.get_name() == exc.expected_key.get_name()]
    where = f"{known_hosts}:{lines[0]}" if lines else str(known_hosts)
    return (f"HOST KEY CHANGED! {where} has {exc.expected_key.get_name()} "
            f"{fingerprint(exc.expected_key)} but the node now offers {fingerprint(exc.key)}. "
            "Someone may be intercepting the connection, or the node was reinstalled. "
            f"Refusing to connect; if the change is expected, run `{trust_hint(cluster_file, True)}`")


# --- recording keys on purpose ------------------------------------------------------------------

@dataclass(frozen=True)
class TrustOutcome:
    """What trust did for one node: added, known, replaced, skipped (local), changed (refused), error."""

    host: str
    address: str
    port: int
    key_type: str | None
    fingerprint: str | None
    status: str
    detail: str

    @property
    def ok(self) -> bool:
        return self.status in ("added", "known", "replaced", "skipped")


def fetch_host_key(address: str, port: int, timeout: float,
                   prefer: Iterable[str] = ()) -> paramiko.PKey:
    """The key a node's sshd offers, without authenticating; ``prefer`` orders key types."""
    sock = socket.create_connection((address, port), timeout=timeout)
    transport = paramiko.Transport(sock)
    try:
        transport.banner_timeout = timeout
        options = transport.get_security_options()
        wanted = []
        for kind in prefer:
            wanted += ["rsa-sha2-512", "rsa-sha2-256"] if kind == "ssh-rsa" else [kind]
        wanted = [k for k in wanted if k in options.key_types]
        if wanted:
            options.key_types = wanted + [k for k in options.key_types if k not in wanted]
        transport.start_client(timeout=timeout)
        return transport.get_remote_server_key()
    finally:
        transport.close()


def trust(cluster: "Cluster", known_hosts: str | os.PathLike | None = None, *,
          replace: bool = False, timeout: float = 10.0) -> list[TrustOutcome]:
    """Fetch every SSH node's key and record the new ones in the known_hosts file.

    A key that differs from the recorded one is refused unless ``replace``; local nodes are
    skipped. The file is rewritten atomically and keeps every line it had.
    """
    path = known_hosts_path(cluster, known_hosts)
    outcomes: list[TrustOutcome] = []
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    drop: set[int] = set()
    add: list[str] = []
    for spec in cluster.hosts:
        node = Node(spec.name, spec.address, int(getattr(spec, "port", 22) or 22))
        if getattr(spec, "local", False):
            outcomes.append(TrustOutcome(node.name, node.address, node.port, None, None, "skipped",
                                         "local node: no SSH"))
            continue
        name = host_key_name(node.address, node.port)
        entries = find_entries(path, name)
        try:
            key = fetch_host_key(node.address, node.port, timeout,
                                 prefer=[e.key.get_name() for _, e in entries])
        except (OSError, paramiko.SSHException, EOFError) as exc:
            outcomes.append(TrustOutcome(node.name, node.address, node.port, None, None, "error",
                                         f"node {node.label}: cannot fetch the host key: {exc or type(exc).__name__}"))
            continue
        same_type = [(n, e) for n, e in entries if e.key.get_name() == key.get_name()]
        outcome = _decide(node, key, same_type, path, replace)
        line = f"{name} {key.get_name()} {key.get_base64()}"
        if outcome.status in ("added", "replaced") and line not in add:
            drop.update(n for n, _ in same_type)
            add.append(line)
        outcomes.append(outcome)
    if add:
        kept = [line for n, line in enumerate(lines, 1) if n not in drop]
        _write_atomic(path, "\n".join(kept + add) + "\n")
    return outcomes


def _decide(node: Node, key: paramiko.PKey, same_type: list[tuple[int, HostKeyEntry]], path: Path,
            replace: bool) -> TrustOutcome:
    fp = fingerprint(key)
    base = dict(host=node.name, address=node.address, port=node.port, key_type=key.get_name(),
                fingerprint=fp)
    if not same_type:
        return TrustOutcome(**base, status="added", detail=f"recorded in {path}")
    if any(e.key == key for _, e in same_type):
        return TrustOutcome(**base, status="known", detail=f"already in {path}")
    where = ", ".join(f"{path}:{n}" for n, _ in same_type)
    old = fingerprint(same_type[0][1].key)
    if replace:
        return TrustOutcome(**base, status="replaced", detail=f"replaced {old} at {where}")
    return TrustOutcome(**base, status="changed",
                        detail=(f"node {node.label}: HOST KEY CHANGED! {where} has {old}, the node "
                                f"offers {fp}; not recorded. If the change is expected, rerun with --replace"))


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".known_hosts.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
