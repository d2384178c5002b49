"""`invoke cluster.trust` against a real sshd: the fingerprint is shown before anything is recorded,
recording needs a yes (or --yes), and a host that already has a key of another type is refused."""

from __future__ import annotations

import json
import sys

import paramiko
import pytest
from invoke import Context
from invoke.exceptions import Exit

from cvs_tasks.tasks import cluster as cluster_tasks


@pytest.fixture
def cluster_file(tmp_path, sshd):
    def write(known):
        path = tmp_path / "cluster.json"
        path.write_text(json.dumps({"username": "root", "priv_key_file": str(sshd.client_key),
                                    "known_hosts": str(known),
                                    "node_dict": {sshd.address: {"port": sshd.port}}}))
        return path
    return write


def _fingerprint(sshd) -> str:
    return paramiko.PKey.from_path(sshd.host_key).fingerprint


def test_without_a_terminal_and_without_yes_nothing_is_recorded(cluster_file, sshd, tmp_path, capsys, monkeypatch):
    known = tmp_path / "known_hosts"
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False, raising=False)
    with pytest.raises(Exit) as info:
        cluster_tasks.trust(Context(), cluster=str(cluster_file(known)))
    assert info.value.code == 2 and "--yes" in info.value.message
    assert _fingerprint(sshd) in capsys.readouterr().out  # shown, so the user can check it
    assert not known.exists()


@pytest.mark.parametrize("answer, recorded", [("y", True), ("n", False), ("", False)])
def test_on_a_terminal_the_user_is_asked_first(cluster_file, sshd, tmp_path, capsys, monkeypatch, answer, recorded):
    known = tmp_path / "known_hosts"
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    asked = []
    monkeypatch.setattr("builtins.input", lambda q: asked.append((q, capsys.readouterr().out)) or answer)
    if recorded:
        cluster_tasks.trust(Context(), cluster=str(cluster_file(known)))
        assert known.read_text() == sshd.host_key_line()
    else:
        with pytest.raises(Exit) as info:
            cluster_tasks.trust(Context(), cluster=str(cluster_file(known)))
        assert info.value.code == 2 and not known.exists()
    [(question, shown_before)] = asked
    assert str(known) in question
    assert _fingerprint(sshd) in shown_before  # the fingerprint is on screen before the question


def test_yes_records_without_asking(cluster_file, sshd, tmp_path, capsys, monkeypatch):
    known = tmp_path / "known_hosts"
    monkeypatch.setattr("builtins.input", lambda q: pytest.fail("asked despite --yes"))
    cluster_tasks.trust(Context(), cluster=str(cluster_file(known)), yes=True)
    assert known.read_text() == sshd.host_key_line()
    assert "added" in capsys.readouterr().out


def test_a_second_key_type_for_a_known_host_is_refused_unless_replace(cluster_file, sshd, tmp_path, capsys):
    other = paramiko.RSAKey.generate(1024)
    name = sshd.host_key_line().split()[0]
    known = tmp_path / "known_hosts"
    known.write_text(f"{name} ssh-rsa {other.get_base64()}\n")
    before = known.read_text()
    with pytest.raises(Exit) as info:
        cluster_tasks.trust(Context(), cluster=str(cluster_file(known)), yes=True)
    assert info.value.code == 3 and "HOST KEY TYPE CHANGED!" in info.value.message
    assert known.read_text() == before  # a MITM warning is not turned into a silent accept
    capsys.readouterr()
    cluster_tasks.trust(Context(), cluster=str(cluster_file(known)), yes=True, replace=True)
    out = capsys.readouterr().out
    assert f"replaced ssh-rsa {other.fingerprint}" in out  # says which key it replaces
    assert known.read_text() == sshd.host_key_line()
