"""Host-key trust decides as OpenSSH does (issue #29, item 4).

Every case is checked against OpenSSH itself on the same known_hosts file: `ssh-keygen -F` for
which lines cover a host name, and a real `ssh -o StrictHostKeyChecking=yes` client against an
sshd on loopback for the verdict (accepted, changed, revoked, unknown). `cluster.trust` and the
connect path must agree with it: a revoked key is neither recorded nor accepted, a wildcard pin
to another key is a key change, a negated or certificate-authority line is no pin.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import paramiko
import pytest

from cvs_tasks.remote import NO_RETRY, connect
from cvs_tasks.remote.hostkeys import host_lookup, record_keys, scan_keys

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "remote"))
from remote_sshd import FakeCluster, FakeHost, SshdFactory, keygen  # noqa: E402

SSH, SSH_KEYGEN = shutil.which("ssh"), shutil.which("ssh-keygen")
pytestmark = pytest.mark.skipif(not (SSH and SSH_KEYGEN), reason="the OpenSSH client is not installed")
ALT_PORT = 2231


def _pub(path: Path) -> str:
    return " ".join(path.with_suffix(".pub").read_text().split()[:2])


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("keys")
    for name in ("one", "two"):
        keygen(root / name)
    return {"K1": _pub(root / "one"), "K2": _pub(root / "two")}


# --- which lines cover a name: ssh-keygen -F is the reference -----------------------------------

PATTERNS = """\
# every pattern form ssh_config(5) PATTERNS and sshd(8) SSH_KNOWN_HOSTS FILE FORMAT describe
127.0.0.* {K1}
@revoked * {K2}
@cert-authority 127.0.0.5 {K1}
!127.0.0.6,127.0.0.? {K2}
[127.0.0.*]:2222 {K1}
node?,10.0.0.1 {K1}
Node1 {K2}
[127.0.0.5]:22 {K1}
!* {K1}
*,!node12 {K2}
@revoked 10.0.0.1,[10.0.0.1]:* {K1}
"""
NAMES = ["127.0.0.5", "127.0.0.6", "127.0.0.50", "[127.0.0.5]:2222", "[127.0.0.5]:2223", "node1", "NODE1",
         "node12", "10.0.0.1", "[10.0.0.1]:2222", "other.example"]


def keygen_found(known_hosts: Path, name: str) -> set[tuple[int, str]]:
    out = subprocess.run([SSH_KEYGEN, "-F", name, "-f", str(known_hosts)], capture_output=True, text=True,
                         timeout=30).stdout
    return {(int(m[1]), m[2]) for m in re.finditer(r"^# Host .* found: line (\d+) ?(\w*)$", out, re.M)}


def our_found(known_hosts: Path, name: str) -> set[tuple[int, str]]:
    found = host_lookup(known_hosts, name)
    return ({(p.lineno, "") for p in found.pins} | {(p.lineno, "REVOKED") for p in found.revoked}
            | {(p.lineno, "CA") for p in found.authorities})


@pytest.mark.parametrize("name", NAMES)
def test_the_lines_covering_a_name_are_the_ones_ssh_keygen_finds(tmp_path, keys, name):
    kh = tmp_path / "known_hosts"
    kh.write_text(PATTERNS.format(**keys))
    assert our_found(kh, name) == keygen_found(kh, name)


def test_hashed_names_are_found_as_ssh_keygen_finds_them(tmp_path, keys):
    kh = tmp_path / "known_hosts"
    kh.write_text("127.0.0.5 {K1}\n[127.0.0.5]:2222 {K2}\nnode1,10.0.0.1 {K1}\n".format(**keys))
    subprocess.run([SSH_KEYGEN, "-H", "-f", str(kh)], capture_output=True, check=True, timeout=30)
    assert "127.0.0.5" not in kh.read_text() and kh.read_text().count("|1|") == 4
    for name in ("127.0.0.5", "[127.0.0.5]:2222", "node1", "10.0.0.1", "127.0.0.6", "[127.0.0.5]:22"):
        assert our_found(kh, name) == keygen_found(kh, name), name


# --- the verdict: a real ssh client against a real sshd ---------------------------------------

@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    root = tmp_path_factory.mktemp("sshd3")
    client = root / "client_ed25519"
    keygen(client)
    factory = SshdFactory(root, client)
    try:
        yield {22: factory.start("plain", port=22), ALT_PORT: factory.start("ported", port=ALT_PORT)}
    finally:
        factory.stop_all()


def openssh_verdict(server, known_hosts: Path) -> str:
    """What `ssh` decides: known (it ran), changed, revoked or new (no pin: refused, strict)."""
    proc = subprocess.run(
        [SSH, "-F", "/dev/null", "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known_hosts}",
         "-o", "GlobalKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "CheckHostIP=no",
         "-o", "ConnectTimeout=10", "-o", "IdentitiesOnly=yes", "-i", str(server.client_key),
         "-p", str(server.port), f"root@{server.address}", "true"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    if proc.returncode == 0:
        return "known"
    if "REVOKED HOST KEY" in proc.stderr:
        return "revoked"
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in proc.stderr:
        return "changed"
    assert "Host key verification failed" in proc.stderr, proc.stderr
    return "new"


def cluster_for(server, known_hosts: Path) -> FakeCluster:
    return FakeCluster(known_hosts.parent / "cluster.json", "root", str(server.client_key),
                       [FakeHost("node0", server.address, server.port)], known_hosts=str(known_hosts))


def connect_verdict(server, known_hosts: Path) -> str:
    with connect(cluster_for(server, known_hosts), connect_timeout=10, retry=NO_RETRY) as hosts:
        [result] = hosts.run("true", timeout=20)
    if result.ok:
        return "known"
    for words, verdict in (("REVOKED HOST KEY", "revoked"), ("HOST KEY CHANGED", "changed"), ("is not in", "new")):
        if words in result.error:
            return verdict
    raise AssertionError(result.error)


# {N}: the name OpenSSH looks up ("addr" or "[addr]:port"), {A}: the address, {W} / {Q}: a `*` / `?`
# pattern covering it, {H}: its hashed name, {S}: the server's key, {O}: another key.
# case -> (known_hosts, OpenSSH's verdict on port 22, on ALT_PORT); each is checked against ssh itself.
CASES = {
    "plain": ("{N} {S}\n", "known", "known"),
    "hashed": ("{H} {S}\n", "known", "known"),
    "comma list": ("10.9.9.9,{N} {S}\n", "known", "known"),
    "wildcard star": ("{W} {S}\n", "known", "known"),
    "wildcard question mark": ("{Q} {S}\n", "known", "known"),
    "wildcard pinned to another key": ("# a site-wide pin\n{W} {O}\n", "changed", "changed"),
    "plain and wildcard disagree": ("{W} {O}\n{N} {S}\n", "known", "known"),
    "negated": ("!{N},{W} {S}\n", "new", "new"),
    "negated, then pinned elsewhere": ("!{N},{W} {O}\n", "new", "new"),
    "revoked everywhere": ("{N} {S}\n@revoked * {S}\n", "revoked", "revoked"),
    "revoked by a wildcard, no pin": ("@revoked {W} {S}\n", "revoked", "revoked"),
    "revoked for another host only": ("{N} {S}\n@revoked 10.9.9.9 {S}\n", "known", "known"),
    "revoked other key, pinned": ("{N} {S}\n@revoked {N} {O}\n", "known", "known"),
    "cert-authority only": ("@cert-authority {N} {S}\n", "new", "new"),
    "cert-authority and a pin": ("@cert-authority * {O}\n{N} {S}\n", "known", "known"),
    "bare address": ("{A} {S}\n", "known", "known"),  # another port: ssh falls back to the bare name
    "bare address pinned to another key": ("{A} {O}\n", "changed", "new"),
    "bare address revoked": ("{A} {S}\n@revoked {A} {S}\n", "revoked", "revoked"),
    "port 22 form": ("[{A}]:22 {S}\n", "new", "new"),  # port 22 is looked up as the bare name only
    "any port": ("[{A}]:* {S}\n", "new", "known"),
    "star alone": ("* {S}\n", "known", "known"),
}


def test_the_cases_reach_every_verdict():
    assert {v for _, *verdicts in CASES.values() for v in verdicts} == {"known", "new", "changed", "revoked"}


def write_case(tmp_path: Path, server, template: str, other: str) -> Path:
    name = server.address if server.port == 22 else f"[{server.address}]:{server.port}"
    prefix = server.address.rsplit(".", 1)[0]
    wild = f"{prefix}.*" if server.port == 22 else f"[{prefix}.*]:{server.port}"
    q = server.address[:-1] + "?"
    kh = tmp_path / f"known_hosts_{server.port}"
    kh.write_text(template.format(N=name, A=server.address, P=server.port, S=_pub(server.host_key), O=other,
                                  W=wild, Q=q if server.port == 22 else f"[{q}]:{server.port}",
                                  H=paramiko.HostKeys.hash_host(name)))
    return kh


@pytest.mark.parametrize("port", [22, ALT_PORT])
@pytest.mark.parametrize("case", sorted(CASES))
def test_trust_and_connect_decide_as_the_ssh_client_does(tmp_path, keys, servers, case, port):
    server = servers[port]
    template, on_22, on_alt = CASES[case]
    kh = write_case(tmp_path, server, template, keys["K1"])
    before = kh.read_text()
    expected = openssh_verdict(server, kh)
    assert expected == (on_22 if port == 22 else on_alt)
    [outcome] = scan_keys(cluster_for(server, kh), kh, timeout=10)
    assert outcome.status == expected, (case, outcome.detail)
    assert connect_verdict(server, kh) == expected
    assert kh.read_text() == before  # deciding writes nothing
    if expected in ("changed", "revoked"):
        assert f"{kh}:" in outcome.detail  # the line that decided it is named


def test_a_revoked_key_is_never_recorded_even_with_replace(tmp_path, keys, servers):
    server = servers[ALT_PORT]
    kh = write_case(tmp_path, server, "{N} {O}\n@revoked {W} {S}\n", keys["K1"])
    before = kh.read_text()
    outcomes = scan_keys(cluster_for(server, kh), kh, replace=True, timeout=10)
    assert [o.status for o in outcomes] == ["revoked"] and not outcomes[0].ok
    assert "REVOKED HOST KEY" in outcomes[0].detail and f"{kh}:2" in outcomes[0].detail
    record_keys(outcomes, kh)
    assert kh.read_text() == before and openssh_verdict(server, kh) == "revoked"


def test_replace_over_a_wildcard_pin_excludes_only_this_host(tmp_path, keys, servers):
    """`--replace` must not drop a site-wide line: the other hosts stay pinned, this one moves."""
    server = servers[22]
    kh = write_case(tmp_path, server, "{W} {O}\n", keys["K1"])
    refused = scan_keys(cluster_for(server, kh), kh, timeout=10)
    assert [o.status for o in refused] == ["changed"] and f"{kh}:1" in refused[0].detail
    done = record_keys(scan_keys(cluster_for(server, kh), kh, replace=True, timeout=10), kh)
    assert [o.status for o in done] == ["replaced"]
    assert openssh_verdict(server, kh) == "known" and connect_verdict(server, kh) == "known"
    neighbour = server.address.rsplit(".", 1)[0] + ".200"
    assert our_found(kh, neighbour) == keygen_found(kh, neighbour) == {(1, "")}
    assert our_found(kh, server.address) == keygen_found(kh, server.address) == {(2, "")}


def test_a_cert_authority_line_is_reported_and_the_plain_key_pinned(tmp_path, keys, servers):
    server = servers[22]
    kh = write_case(tmp_path, server, "@cert-authority {W} {O}\n", keys["K1"])
    [outcome] = scan_keys(cluster_for(server, kh), kh, timeout=10)
    assert outcome.status == "new" and "@cert-authority" in outcome.detail and f"{kh}:1" in outcome.detail
    record_keys([outcome], kh)
    assert openssh_verdict(server, kh) == "known" and connect_verdict(server, kh) == "known"


def test_a_key_revoked_for_the_bare_address_is_revoked_on_another_port(tmp_path, keys, servers):
    """ssh falls back to the bare name for a port nothing pins, and finds the key revoked there."""
    server = servers[ALT_PORT]
    kh = write_case(tmp_path, server, "@revoked {A} {S}\n", keys["K1"])
    assert openssh_verdict(server, kh) == "revoked" and connect_verdict(server, kh) == "revoked"
    [outcome] = scan_keys(cluster_for(server, kh), kh, timeout=10)
    assert outcome.status == "revoked" and f"{kh}:1" in outcome.detail


@pytest.mark.parametrize("template, words, lineno", [("{W} {O}\n", "HOST KEY CHANGED!", 1),
                                                     ("{N} {O}\n@revoked * {S}\n", "REVOKED HOST KEY!", 2)])
def test_invoke_cluster_trust_yes_records_nothing_over_a_wildcard_pin_or_a_revocation(tmp_path, keys, servers,
                                                                                    capsys, template, words, lineno):
    import json

    from invoke import Context
    from invoke.exceptions import Exit

    from cvs_tasks.tasks import cluster as cluster_tasks

    server = servers[ALT_PORT]
    kh = write_case(tmp_path, server, template, keys["K1"])
    before = kh.read_text()
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"username": "root", "priv_key_file": str(server.client_key),
                                   "known_hosts": str(kh), "node_dict": {server.address: {"port": server.port}}}))
    with pytest.raises(Exit) as info:
        cluster_tasks.trust(Context(), cluster=str(cluster), yes=True, timeout="10")
    assert info.value.code != 0 and words in info.value.message and f"{kh}:{lineno}" in info.value.message
    assert kh.read_text() == before
    assert words in capsys.readouterr().out
