"""known_hosts lookup (plain, [host]:port and hashed names) and where the file is."""

from __future__ import annotations

from pathlib import Path

import paramiko
import pytest
from paramiko.hostkeys import HostKeys

from cvs_tasks.inputs import InputRefused
from cvs_tasks.remote.hostkeys import host_key_name, host_lookup, known_hosts_path


class C:  # the two Cluster attributes known_hosts_path reads
    def __init__(self, known_hosts, path="/etc/cvs/cluster.json"):
        self.known_hosts, self.path = known_hosts, Path(path)


def key(fill: int) -> paramiko.PKey:
    blob = b"\x00\x00\x00\x0bssh-ed25519" + b"\x00\x00\x00\x20" + bytes([fill]) * 32
    return paramiko.PKey.from_type_string("ssh-ed25519", blob)


def test_known_hosts_path_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert known_hosts_path(C("kh/hosts"), "/flag/kh") == Path("/flag/kh")
    assert known_hosts_path(C("kh/hosts")) == Path("/etc/cvs/kh/hosts")
    assert known_hosts_path(C("/abs/kh")) == Path("/abs/kh")
    assert known_hosts_path(C(None)) == tmp_path / ".ssh" / "known_hosts"


def test_host_key_name():
    assert host_key_name("10.0.0.1", 22) == "10.0.0.1"
    assert host_key_name("10.0.0.1", 2222) == "[10.0.0.1]:2222"


def test_host_lookup_matches_plain_ported_and_hashed_names(tmp_path):
    hashed = HostKeys.hash_host("10.0.0.5")
    kh = tmp_path / "known_hosts"
    kh.write_text("\n".join([
        "# a comment",
        f"10.0.0.1,node1 ssh-ed25519 {key(1).get_base64()}",
        f"[10.0.0.1]:2222 ssh-ed25519 {key(2).get_base64()}",
        "@cert-authority *.example ssh-ed25519 " + key(3).get_base64(),
        f"{hashed} ssh-ed25519 {key(5).get_base64()}",
        "",
    ]))
    def pins(path, name):
        return [(p.lineno, p.key) for p in host_lookup(path, name).pins]

    assert pins(kh, "10.0.0.1") == [(2, key(1))]
    assert pins(kh, "[10.0.0.1]:2222") == [(3, key(2))]
    assert pins(kh, "10.0.0.5") == [(5, key(5))]
    assert pins(kh, "10.0.0.9") == [] and pins(tmp_path / "none", "x") == []


@pytest.mark.parametrize("line", ["garbage line", "10.0.0.1 ssh-ed25519 !!notbase64!!",
                                  "10.0.0.1\x1b ssh-ed25519 AAAA"])
def test_a_malformed_known_hosts_line_is_refused_with_file_and_line(tmp_path, line):
    kh = tmp_path / "known_hosts"
    kh.write_text(f"# ok\n{line}\n")
    with pytest.raises(InputRefused) as info:
        host_lookup(kh, "10.0.0.1")
    assert info.value.exit_code == 2 and info.value.where == "line 2" and str(kh) in str(info.value)
