"""Host keys: verified against a known_hosts file, recorded only on purpose (``cluster.trust``).

Fabric's Connection accepts any key (AutoAddPolicy); SshHosts replaces that policy with
``StrictHostKeyPolicy`` before the first connect, so an unknown key is refused and a changed
key raises paramiko's BadHostKeyException. paramiko reads known_hosts literally, so the file is
matched here as ssh matches it (known_hosts.py) and each connection gets only the keys pinned for
its node (``pin_host_keys``); a revoked key is refused as revoked. The messages here say which
node, which file and line, and what command fixes it.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

import paramiko

from cvs_tasks.identifiers import control_characters
from cvs_tasks.inputs import InputRefused, read_text
from cvs_tasks.remote.known_hosts import HostLookup, KnownHostLine, NotAnEntry, lookup, parse_line
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


class RevokedHostKey(paramiko.SSHException):
    """The node offered a key that an ``@revoked`` line of known_hosts covers for it."""

    def __init__(self, hostname: str, key: paramiko.PKey, line: KnownHostLine):
        super().__init__(f"host key for {hostname} is revoked")
        self.hostname = hostname
        self.key = key
        self.line = line


class StrictHostKeyPolicy(paramiko.RejectPolicy):
    """Refuse unknown keys with an exception that carries the offered key (for the message); a key
    revoked in ``known_hosts`` for that host is refused as revoked."""

    def __init__(self, known_hosts: Path | None = None):
        self.known_hosts = known_hosts

    def missing_host_key(self, client, hostname, key):  # noqa: D102 (paramiko hook)
        if self.known_hosts is not None:
            found = host_lookup(self.known_hosts, hostname)
            revoked = found.revocation(key)
            if revoked is not None:
                raise RevokedHostKey(hostname, key, revoked)
            if found.decide(key) == "known":  # pinned under the bare name only, as ssh accepts it
                return
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


def read_known_hosts(path: Path) -> list[tuple[int, str, KnownHostLine | None]]:
    """(line number, line, entry) for every line of ``path`` (missing file: none), read through the
    bounded reader. A line that is not a known_hosts entry at all (fewer than three fields, an
    unknown marker, key data that is not base64, a control character) is refused with file and
    line, exit 2; comments, blank lines and key types paramiko cannot use have entry None."""
    if not os.path.lexists(path):
        return []
    out: list[tuple[int, str, KnownHostLine | None]] = []
    for lineno, line in enumerate(read_text(path, "known_hosts").split("\n"), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            out.append((lineno, line, None))
            continue
        if control_characters(stripped):
            raise InputRefused(path, "not a known_hosts entry (control character); fix or delete the line",
                               f"line {lineno}")
        try:
            out.append((lineno, line, parse_line(stripped, lineno)))
        except NotAnEntry as exc:
            raise InputRefused(path, f"{exc}; fix or delete the line", f"line {lineno}") from None
    return out


_ENTRIES: dict[str, tuple[tuple[int, int, int], list[KnownHostLine]]] = {}


def _entries(path: Path) -> list[KnownHostLine]:
    """The file's entries, parsed once per version of the file (inode, size, mtime): a cluster of
    N nodes looks up N names in one file, and parsing it per name cost O(N²) at connect."""
    try:
        st = os.stat(path)
    except OSError:
        return [e for _, _, e in read_known_hosts(path) if e is not None]
    stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
    cached = _ENTRIES.get(str(path))
    if cached is not None and cached[0] == stamp:
        return cached[1]
    entries = [e for _, _, e in read_known_hosts(path) if e is not None]
    _ENTRIES[str(path)] = (stamp, entries)
    return entries


def host_lookup(path: Path, name: str) -> HostLookup:
    """The lines of ``path`` that cover host ``name`` as OpenSSH matches them (known_hosts.py)."""
    return lookup(_entries(path), name)


def pin_host_keys(client: paramiko.SSHClient, path: Path, name: str) -> None:
    """Give ``client`` the keys ``path`` pins for ``name``, under that exact name, minus revoked ones.

    paramiko compares names literally and ignores markers, so the matching (wildcards, negation,
    hashes, ``@revoked``) is done here; a key offered that is not among these reaches paramiko's
    BadHostKeyException (other pins) or the policy (none), and both refuse it."""
    keys = client.get_host_keys()
    for line in host_lookup(path, name).trusted_pins():
        keys.add(name, line.key.get_name(), line.key)


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
    found = host_lookup(known_hosts, name)
    revoked = found.revocation(exc.key)
    if revoked is not None:
        return describe_revoked_key(node, RevokedHostKey(name, exc.key, revoked), known_hosts)
    lines = [p.lineno for p in found.pins if p.key.get_name() == exc.expected_key.get_name()]
    where = f"{known_hosts}:{lines[0]}" if lines else str(known_hosts)
    return (f"HOST KEY CHANGED! {where} has {exc.expected_key.get_name()} "
            f"{fingerprint(exc.expected_key)} but the node now offers {fingerprint(exc.key)}. "
            "Someone may be intercepting the connection, or the node was reinstalled. "
            f"Refusing to connect; if the change is expected, run `{trust_hint(cluster_file, True)}`")


def describe_revoked_key(node: Node, exc: RevokedHostKey, known_hosts: Path) -> str:
    return (f"REVOKED HOST KEY! the node offers {exc.key.get_name()} {fingerprint(exc.key)}, which "
            f"{known_hosts}:{exc.line.lineno} revokes (@revoked {exc.line.hosts}). Refusing to connect; "
            "the node needs a new host key, recorded once it has one")


# --- recording keys on purpose ------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class TrustOutcome:
    """What trust found (and did) for one node.

    Before recording: ``new`` (no key for this host), ``replace`` (a differing key, ``--replace``
    given), ``known``, ``changed`` (refused: differs, or a second key type), ``revoked`` (refused,
    ``--replace`` or not: an ``@revoked`` line covers the key), ``skipped`` (local), ``error``.
    After ``record_keys``: ``new`` -> ``added``, ``replace`` -> ``replaced``.
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
    exclude: tuple[int, ...] = ()  # shared line numbers this host is excluded from

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

    Lines cover a node as OpenSSH matches them (wildcards, negation, hashes: known_hosts.py). A
    host that already has a pinned key keeps it: a different key of the same type is a change, and
    so is a key of another type (an attacker can offer any type the client accepts); both are
    refused unless ``replace``, which then names the line(s) it replaces. A key an ``@revoked``
    line covers is refused, ``replace`` or not. Local nodes are skipped.
    """
    path = known_hosts_path(cluster, known_hosts)
    lines = [e for _, _, e in read_known_hosts(path) if e is not None]
    outcomes: list[TrustOutcome] = []
    for spec in cluster.hosts:
        node = Node(spec.name, spec.address, int(getattr(spec, "port", 22) or 22))
        if getattr(spec, "local", False):
            outcomes.append(TrustOutcome(node.name, node.address, node.port, None, None, "skipped",
                                         "local node: no SSH"))
            continue
        found = lookup(lines, host_key_name(node.address, node.port))
        try:
            key = fetch_host_key(node.address, node.port, timeout,
                                 prefer=[p.key.get_name() for p in found.trusted_pins()])
        except (OSError, paramiko.SSHException, EOFError) as exc:
            outcomes.append(TrustOutcome(node.name, node.address, node.port, None, None, "error",
                                         f"node {node.label}: cannot fetch the host key: {exc or type(exc).__name__}"))
            continue
        outcomes.append(decide(node, found, key, path, replace))
    return outcomes


def decide(node: Node, found: HostLookup, key: paramiko.PKey, path: Path, replace: bool) -> TrustOutcome:
    """What recording ``key`` for ``node`` would do, given the lines that cover it. Pure."""
    fp = fingerprint(key)
    name = found.name
    base = dict(host=node.name, address=node.address, port=node.port, key_type=key.get_name(),
                fingerprint=fp, line=f"{name} {key.get_name()} {key.get_base64()}")
    verdict = found.decide(key)
    line = found.revocation(key)
    if line is not None:
        return TrustOutcome(**base, status="revoked",
                            detail=(f"node {node.label}: REVOKED HOST KEY! {path}:{line.lineno} revokes "
                                    f"{key.get_name()} {fp} (@revoked {line.hosts}); not recorded, even with "
                                    "--replace: the node needs a new host key"))
    if verdict == "known":
        where = found.pinning_line(key)
        alias = "" if where in found.pins else f" (as {where.hosts}: ssh falls back to the name without the port)"
        return TrustOutcome(**base, status="known", detail=f"already in {path}:{where.lineno}{alias}")
    if verdict == "new":
        ca = "".join(f"; {path}:{a.lineno} (@cert-authority {a.hosts}) also covers it, but host certificates "
                     "are not checked here, so the plain key is what is pinned" for a in found.authorities[:1])
        return TrustOutcome(**base, status="new", detail=f"new: will be recorded in {path}{ca}")
    where = ", ".join(f"{path}:{p.lineno} ({p.hosts})" for p in found.pins)
    old = ", ".join(f"{p.key.get_name()} {fingerprint(p.key)}" for p in found.pins)
    if replace:
        drop = tuple(p.lineno for p in found.pins if p.only_names(name))
        shared = tuple(p.lineno for p in found.pins if not p.only_names(name))
        note = f"; {name} is excluded (!{name}) from shared line(s) {', '.join(map(str, shared))}" if shared else ""
        return TrustOutcome(**base, status="replace", drop=drop, exclude=shared,
                            detail=f"replaces {old} at {where}{note}")
    same_type = any(p.key.get_name() == key.get_name() for p in found.pins)
    what = "HOST KEY CHANGED!" if same_type else "HOST KEY TYPE CHANGED!"
    return TrustOutcome(**base, status="changed",
                        detail=(f"node {node.label}: {what} {where} has {old}, the node offers "
                                f"{key.get_name()} {fp}; not recorded. If the change is expected, "
                                "rerun with --replace"))


def record_keys(outcomes: list[TrustOutcome], known_hosts: Path) -> list[TrustOutcome]:
    """Write the pending keys (atomically, keeping every other line); outcomes as recorded.

    A replaced pin on a line of its own is dropped; a line shared with other hosts (a wildcard, a
    list) keeps pinning them and gets ``!name`` in front, so it no longer covers the replaced host."""
    pending = [o for o in outcomes if o.pending]
    if pending:
        lines = [line for _, line, _ in read_known_hosts(known_hosts)]
        if lines and lines[-1] == "":
            lines.pop()
        drop = {n for o in pending for n in o.drop}
        exclude: dict[int, list[str]] = {}
        for o in pending:
            for n in o.exclude:
                exclude.setdefault(n, []).append(host_key_name(o.address, o.port))
        kept = [_excluding(line, exclude[n]) if n in exclude else line
                for n, line in enumerate(lines, 1) if n not in drop]
        add = list(dict.fromkeys(o.line for o in pending if o.line))
        _write_atomic(known_hosts, "\n".join(kept + add) + "\n")
    done = {"new": "added", "replace": "replaced"}
    return [replace_status(o, done[o.status], f"recorded in {known_hosts}" if o.status == "new" else
                           o.detail.replace("replaces", "replaced", 1)) if o.pending else o
            for o in outcomes]


def _excluding(line: str, names: list[str]) -> str:
    """A pin ``line`` with ``!name,`` put in front of its host patterns (a pin has no marker)."""
    hosts, rest = line.split(None, 1)
    return ",".join(f"!{n}" for n in dict.fromkeys(names)) + f",{hosts} {rest}"


def replace_status(outcome: TrustOutcome, status: str, detail: str) -> TrustOutcome:
    return dataclasses.replace(outcome, status=status, detail=detail)


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
