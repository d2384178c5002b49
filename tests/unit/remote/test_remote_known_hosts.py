"""known_hosts matching as OpenSSH does it, on plain data (the agreement with ssh itself is in
tests/hostile/test_hostile_trust_round3.py)."""

from __future__ import annotations

import paramiko
import pytest
from paramiko.hostkeys import HostKeys

from cvs_tasks.remote.hostkeys import _excluding
from cvs_tasks.remote.known_hosts import NotAnEntry, host_matches, lookup, parse_line, pattern_list_match


def key(fill: int) -> paramiko.PKey:
    blob = b"\x00\x00\x00\x0bssh-ed25519" + b"\x00\x00\x00\x20" + bytes([fill]) * 32
    return paramiko.PKey.from_type_string("ssh-ed25519", blob)


def lines(*text: str):
    return [parse_line(t, n) for n, t in enumerate(text, 1)]


@pytest.mark.parametrize("patterns, name, expected", [
    ("10.0.0.*", "10.0.0.5", 1),
    ("10.0.0.*", "[10.0.0.5]:2222", 0),  # brackets are plain characters
    ("[10.0.0.*]:2222", "[10.0.0.5]:2222", 1),
    ("[10.0.0.*]:2222", "[10.0.0.5]:2223", 0),
    ("10.0.0.?", "10.0.0.5", 1),
    ("10.0.0.?", "10.0.0.50", 0),
    ("!10.0.0.5,10.0.0.*", "10.0.0.5", -1),  # a negation wins over any positive match
    ("10.0.0.*,!10.0.0.5", "10.0.0.6", 1),
    ("!*", "anything", -1),
    ("Node1", "node1", 1),  # case does not matter
    ("a,b,c", "b", 1),
    ("[ab]c", "ac", 0),  # no character classes: '[' is literal
])
def test_pattern_list_match(patterns, name, expected):
    assert pattern_list_match(name, patterns) == expected


def test_hashed_names_match_only_their_host_and_a_broken_hash_matches_nothing():
    hashed = HostKeys.hash_host("[10.0.0.5]:2222")
    assert host_matches(hashed, "[10.0.0.5]:2222") and not host_matches(hashed, "10.0.0.5")
    assert not host_matches("|1|not-base64|", "10.0.0.5") and not host_matches("|2|x|y", "10.0.0.5")


def test_lookup_sorts_pins_revocations_and_authorities():
    found = lookup(lines(f"10.0.0.* ssh-ed25519 {key(1).get_base64()}",
                         f"@revoked * ssh-ed25519 {key(2).get_base64()}",
                         f"@cert-authority 10.0.0.5 ssh-ed25519 {key(3).get_base64()}",
                         f"!10.0.0.5,* ssh-ed25519 {key(4).get_base64()}"), "10.0.0.5")
    assert [p.lineno for p in found.pins] == [1]
    assert [p.lineno for p in found.revoked] == [2] and [p.lineno for p in found.authorities] == [3]
    assert [found.decide(key(n)) for n in (1, 2, 3, 4)] == ["known", "revoked", "changed", "changed"]


def test_a_revoked_pin_is_not_trusted_and_a_ca_line_is_no_pin():
    both = lookup(lines(f"h ssh-ed25519 {key(1).get_base64()}", f"@revoked h ssh-ed25519 {key(1).get_base64()}"), "h")
    assert both.trusted_pins() == [] and both.decide(key(1)) == "revoked"
    ca = lookup(lines(f"@cert-authority h ssh-ed25519 {key(1).get_base64()}"), "h")
    assert ca.pins == [] and ca.decide(key(1)) == "new"


def test_another_port_falls_back_to_the_bare_name_only_when_nothing_names_the_port():
    bare = lines(f"h ssh-ed25519 {key(1).get_base64()}")
    assert lookup(bare, "[h]:2222").decide(key(1)) == "known"
    assert lookup(bare, "[h]:2222").decide(key(2)) == "new"  # ssh: the bare name's "changed" is not used
    ported = lines(f"h ssh-ed25519 {key(1).get_base64()}", f"[h]:2222 ssh-ed25519 {key(2).get_base64()}")
    assert lookup(ported, "[h]:2222").decide(key(1)) == "changed"
    revoked = lines(f"@revoked h ssh-ed25519 {key(1).get_base64()}")
    assert lookup(revoked, "[h]:2222").decide(key(1)) == "revoked"


@pytest.mark.parametrize("text, words", [("@bogus h ssh-ed25519 AAAA", "unknown marker"),
                                         ("@revoked h ssh-ed25519", "not a known_hosts entry"),
                                         ("h ssh-ed25519 !!!", "unreadable key data")])
def test_lines_ssh_would_not_read_are_refused(text, words):
    with pytest.raises(NotAnEntry, match=words):
        parse_line(text, 1)


def test_an_unknown_key_type_is_skipped_not_refused():
    assert parse_line("h sk-ssh-ed25519@openssh.com AAAA", 1) is None


def test_replace_excludes_the_host_from_a_shared_line():
    shared = _excluding("10.0.0.* ssh-ed25519 AAAA comment", ["10.0.0.5"])
    assert shared == "!10.0.0.5,10.0.0.* ssh-ed25519 AAAA comment"
    assert pattern_list_match("10.0.0.5", "!10.0.0.5,10.0.0.*") == -1
    assert pattern_list_match("10.0.0.6", "!10.0.0.5,10.0.0.*") == 1
