"""known_hosts read the way OpenSSH reads it (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT", ssh_config(5)
PATTERNS): markers, hashed names, wildcard and negated patterns. Pure: text in, decisions out.

paramiko's HostKeys compares names literally and knows no markers, so a wildcard pin or an
``@revoked`` line would be ignored by it. Here:

* a line's host field is either one hashed name (``|1|salt|hash``, HMAC-SHA1 of the name) or a
  comma list of patterns, ``*`` any run of characters, ``?`` one character, ``!`` a negation
  that wins over every positive match of the same line; matching ignores case. Brackets are
  plain characters: ``[10.0.0.*]:2222`` matches ``[10.0.0.5]:2222``, the name OpenSSH looks up
  for port 2222;
* ``@revoked`` lines that match the host name keys that are refused for it, whatever else the
  file says;
* a host on another port is looked up as ``[host]:port``; when no line pins that name, ssh
  accepts a key the bare ``host`` pins ("checking without port identifier"), and so do we;
* ``@cert-authority`` lines name a CA trusted to sign host certificates. A plain host key is
  never checked against them (OpenSSH neither), so they are not a pin: the host counts as having
  no recorded key unless a plain line matches it. This harness does not verify certificates.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from functools import lru_cache

import paramiko
from paramiko.hostkeys import HostKeys

MARKERS = {"@revoked": "revoked", "@cert-authority": "cert-authority"}
HASHED_PREFIX = "|1|"


@dataclass(frozen=True)
class KnownHostLine:
    """One key line: its number, marker (None, ``revoked``, ``cert-authority``), host field, key."""

    lineno: int
    marker: str | None
    hosts: str
    key: paramiko.PKey

    @property
    def hashed(self) -> bool:
        return self.hosts.startswith(HASHED_PREFIX)

    @property
    def where(self) -> str:
        return f"line {self.lineno}" + (f" (@{self.marker})" if self.marker else "")

    def only_names(self, name: str) -> bool:
        """Does the host field name exactly this one host (so dropping the line affects no other)?"""
        return self.hashed or self.hosts.lower() == name.lower()


class NotAnEntry(ValueError):
    """A line that is not a known_hosts entry; the message says what is wrong."""


def parse_line(text: str, lineno: int) -> KnownHostLine | None:
    """The entry on one stripped, non-comment line; None for a key type this client cannot use.

    Raises NotAnEntry for a line OpenSSH would not read either (missing fields, bad base64)."""
    fields = text.split()
    marker = None
    if fields and fields[0].startswith("@"):
        if fields[0] not in MARKERS:
            raise NotAnEntry(f"unknown marker {fields[0]!r} (OpenSSH knows @revoked and @cert-authority)")
        marker = MARKERS[fields.pop(0)]
    if len(fields) < 3:
        raise NotAnEntry("not a known_hosts entry ([marker] hosts key-type key)")
    hosts, key_type, data = fields[:3]
    try:
        blob = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise NotAnEntry(f"unreadable key data ({exc})") from None
    try:
        key = paramiko.PKey.from_type_string(key_type, blob)
    except paramiko.UnknownKeyType:
        return None
    except (paramiko.SSHException, ValueError, TypeError, IndexError) as exc:
        raise NotAnEntry(f"unreadable {key_type} key ({exc})") from None
    return KnownHostLine(lineno, marker, hosts, key)


@lru_cache(maxsize=512)
def _glob(pattern: str) -> re.Pattern[str]:
    parts = [".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern]
    return re.compile("".join(parts), re.DOTALL)


def pattern_list_match(name: str, patterns: str) -> int:
    """OpenSSH's match_pattern_list: -1 when a negated pattern matches, 1 for a positive match, else 0."""
    name = name.lower()
    positive = 0
    for item in patterns.split(","):
        negated = item.startswith("!")
        if negated:
            item = item[1:]
        item = item.lower()
        # a literal needs no pattern: a cluster file of N nodes pins N literal names, more than
        # _glob's cache holds, and compiling N² patterns cost a minute at 1,024 nodes
        if (_glob(item).fullmatch(name) if "*" in item or "?" in item else item == name):
            if negated:
                return -1
            positive = 1
    return positive


def host_matches(hosts: str, name: str) -> bool:
    """Does a line's host field cover ``name`` (``host`` on port 22, ``[host]:port`` otherwise)?"""
    if hosts.startswith("|"):  # OpenSSH: a hashed name; one it cannot decode matches nothing
        try:
            return HostKeys.hash_host(name.lower(), hosts) == hosts
        except (ValueError, TypeError, IndexError, binascii.Error):
            return False
    return pattern_list_match(name, hosts) == 1


@dataclass(frozen=True)
class HostLookup:
    """The lines of one file that cover one host name, by kind."""

    name: str
    pins: list[KnownHostLine] = field(default_factory=list)
    revoked: list[KnownHostLine] = field(default_factory=list)
    authorities: list[KnownHostLine] = field(default_factory=list)
    fallback: HostLookup | None = None  # for ``[host]:port``: the bare ``host``, consulted when no line pins

    def revoked_line(self, key: paramiko.PKey) -> KnownHostLine | None:
        return next((line for line in self.revoked if line.key == key), None)

    def revocation(self, key: paramiko.PKey) -> KnownHostLine | None:
        """The ``@revoked`` line that refuses ``key``: one for this name, or, when this name pins
        nothing, one for the bare name ssh falls back to (ssh reports that as revoked too)."""
        line = self.revoked_line(key)
        if line is None and not self.pins and self.fallback is not None:
            line = self.fallback.revocation(key)
        return line

    def pinning_line(self, key: paramiko.PKey) -> KnownHostLine | None:
        """The line that makes ``key`` known (here, or through the bare-name fallback)."""
        line = next((p for p in self.pins if p.key == key), None)
        if line is None and not self.pins and self.fallback is not None and self.fallback.decide(key) == "known":
            line = self.fallback.pinning_line(key)
        return line

    def trusted_pins(self) -> list[KnownHostLine]:
        """Pins whose key is not also revoked for this host: what a connection may accept."""
        return [p for p in self.pins if self.revoked_line(p.key) is None]

    def decide(self, key: paramiko.PKey) -> str:
        """``revoked``, ``known``, ``changed`` (pinned to other keys) or ``new`` (no pin).

        As ssh does for a host on another port: with no line for ``[host]:port`` at all, a key the
        bare ``host`` pins (and does not revoke) is known; anything else there leaves it new."""
        if self.revocation(key) is not None:
            return "revoked"
        if self.pinning_line(key) is not None:
            return "known"
        return "changed" if self.pins else "new"


PORTED_NAME = re.compile(r"\A\[(.+)\]:([0-9]+)\Z")


def lookup(lines: list[KnownHostLine], name: str) -> HostLookup:
    """Sort the lines that cover ``name`` into pins, revocations and certificate authorities."""
    ported = PORTED_NAME.match(name)
    fallback = lookup(lines, ported[1]) if ported and ported[2] != "22" else None
    found = HostLookup(name, fallback=fallback)
    kinds = {None: found.pins, "revoked": found.revoked, "cert-authority": found.authorities}
    for line in lines:
        if host_matches(line.hosts, name):
            kinds[line.marker].append(line)
    return found
