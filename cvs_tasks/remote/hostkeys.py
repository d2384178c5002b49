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
from paramiko.hostkeys import HostKeyEntry, HostKeys, InvalidHostKey

from cvs_tasks.identifiers import control_characters
from cvs_tasks.inputs import InputRefused, read_text
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


def read_known_hosts(path: Path) -> list[tuple[int, str, HostKeyEntry | None]]:
    """(line number, line, entry) for every line of ``path`` (missing file: none), read through the
    bounded reader. A line that is not a known_hosts entry at all (fewer than three fields, key
    data that is not base64, a control character) is refused with file and line, exit 2; an entry
    paramiko cannot use (a ``@cert-authority`` marker, an unknown key type) has entry None."""
    if not os.path.lexists(path):
        return []
    out: list[tuple[int, str, HostKeyEntry | None]] = []
    for lineno, line in enumerate(read_text(path, "known_hosts").split("\n"), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            out.append((lineno, line, None))
            continue
        if control_characters(stripped) or len(stripped.split()) < 3:
            raise InputRefused(path, "not a known_hosts entry (host, key type, key); fix or delete the line",
                               f"line {lineno}")
        if stripped.startswith("@"):
            out.append((lineno, line, None))
            continue
        try:
            entry = HostKeyEntry.from_line(stripped, lineno)
        except (InvalidHostKey, paramiko.SSHException, ValueError, TypeError) as exc:
            raise InputRefused(path, f"unreadable key data ({exc}); fix or delete the line",
                               f"line {lineno}") from None
        out.append((lineno, line, entry))
    return out


def load_known_hosts(client: paramiko.SSHClient, path: Path) -> None:
    """Give ``client`` every usable key of ``path`` (instead of paramiko's loader, which raises a
    traceback on a malformed line)."""
    keys = client.get_host_keys()
    for _, _, entry in read_known_hosts(path):
        if entry is not None:
            for name in entry.hostnames:
                keys.add(name, entry.key.get_name(), entry.key)


def find_entries(path: Path, name: str) -> list[tuple[int, HostKeyEntry]]:
    """(line number, entry) for each line of ``path`` that names ``name`` (hashed names too)."""
    return [(n, e) for n, _, e in read_known_hosts(path)
            if e is not None and any(_name_matches(p, name) for p in e.hostnames)]


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
    """What trust found (and did) for one node.

    Before recording: ``new`` (no key for this host), ``replace`` (a differing key, ``--replace``
    given), ``known``, ``changed`` (refused: differs, or a second key type), ``skipped`` (local),
    ``error``. After ``record_keys``: ``new`` -> ``added``, ``replace`` -> ``replaced``.
    """

    host: str
    address: str
    port: int
    key_type: str | None
    fingerprint: str | None
    status: str
    detail: str
    line: str | None = None  # the known_hosts line to add
    drop: tuple[int, ...] = ()  # line numbers it replaces

    @property
    def ok(self) -> bool:
        return self.status in ("new", "replace", "added", "known", "replaced", "skipped")

    @property
    def pending(self) -> bool:
        return self.status in ("new", "replace")


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


def scan_keys(cluster: "Cluster", known_hosts: str | os.PathLike | None = None, *,
              replace: bool = False, timeout: float = 10.0) -> list[TrustOutcome]:
    """Fetch every SSH node's key and decide, per node, what recording it would do. Writes nothing.

    A host that already has a recorded key keeps it: a different key of the same type is a change,
    and so is a key of another type (an attacker can offer any type the client accepts); both are
    refused unless ``replace``, which then names the key(s) it replaces. Local nodes are skipped.
    """
    path = known_hosts_path(cluster, known_hosts)
    entries_all = read_known_hosts(path)
    outcomes: list[TrustOutcome] = []
    for spec in cluster.hosts:
        node = Node(spec.name, spec.address, int(getattr(spec, "port", 22) or 22))
        if getattr(spec, "local", False):
            outcomes.append(TrustOutcome(node.name, node.address, node.port, None, None, "skipped",
                                         "local node: no SSH"))
            continue
        name = host_key_name(node.address, node.port)
        entries = [(n, e) for n, _, e in entries_all
                   if e is not None and any(_name_matches(p, name) for p in e.hostnames)]
        try:
            key = fetch_host_key(node.address, node.port, timeout,
                                 prefer=[e.key.get_name() for _, e in entries])
        except (OSError, paramiko.SSHException, EOFError) as exc:
            outcomes.append(TrustOutcome(node.name, node.address, node.port, None, None, "error",
                                         f"node {node.label}: cannot fetch the host key: {exc or type(exc).__name__}"))
            continue
        outcomes.append(_decide(node, name, key, entries, path, replace))
    return outcomes


def _decide(node: Node, name: str, key: paramiko.PKey, entries: list[tuple[int, HostKeyEntry]],
            path: Path, replace: bool) -> TrustOutcome:
    fp = fingerprint(key)
    base = dict(host=node.name, address=node.address, port=node.port, key_type=key.get_name(),
                fingerprint=fp, line=f"{name} {key.get_name()} {key.get_base64()}")
    if not entries:
        return TrustOutcome(**base, status="new", detail=f"new: will be recorded in {path}")
    if any(e.key == key for _, e in entries):
        return TrustOutcome(**base, status="known", detail=f"already in {path}")
    where = ", ".join(f"{path}:{n}" for n, _ in entries)
    old = ", ".join(f"{e.key.get_name()} {fingerprint(e.key)}" for _, e in entries)
    if replace:
        return TrustOutcome(**base, status="replace", drop=tuple(n for n, _ in entries),
                            detail=f"replaces {old} at {where}")
    same_type = any(e.key.get_name() == key.get_name() for _, e in entries)
    what = "HOST KEY CHANGED!" if same_type else "HOST KEY TYPE CHANGED!"
    return TrustOutcome(**base, status="changed",
                        detail=(f"node {node.label}: {what} {where} has {old}, the node offers "
                                f"{key.get_name()} {fp}; not recorded. If the change is expected, "
                                "rerun with --replace"))


def record_keys(outcomes: list[TrustOutcome], known_hosts: Path) -> list[TrustOutcome]:
    """Write the pending keys (atomically, keeping every other line); outcomes as recorded."""
    pending = [o for o in outcomes if o.pending]
    if pending:
        lines = [line for _, line, _ in read_known_hosts(known_hosts)]
        if lines and lines[-1] == "":
            lines.pop()
        drop = {n for o in pending for n in o.drop}
        kept = [line for n, line in enumerate(lines, 1) if n not in drop]
        add = list(dict.fromkeys(o.line for o in pending if o.line))
        _write_atomic(known_hosts, "\n".join(kept + add) + "\n")
    done = {"new": "added", "replace": "replaced"}
    return [replace_status(o, done[o.status], f"recorded in {known_hosts}" if o.status == "new" else
                           o.detail.replace("replaces", "replaced", 1)) if o.pending else o
            for o in outcomes]


def replace_status(outcome: TrustOutcome, status: str, detail: str) -> TrustOutcome:
    return TrustOutcome(outcome.host, outcome.address, outcome.port, outcome.key_type,
                        outcome.fingerprint, status, detail, outcome.line, outcome.drop)


def trust(cluster: "Cluster", known_hosts: str | os.PathLike | None = None, *,
          replace: bool = False, timeout: float = 10.0) -> list[TrustOutcome]:
    """Scan and record without asking (scripts and tests; `invoke cluster.trust` asks first)."""
    path = known_hosts_path(cluster, known_hosts)
    return record_keys(scan_keys(cluster, path, replace=replace, timeout=timeout), path)


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
