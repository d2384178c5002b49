"""Start and stop sshd daemons on loopback addresses for the remote integration tests."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
CANDIDATE_ADDRESSES = [f"127.0.0.{n}" for n in range(77, 97)]


def _free(address: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError:
            return False
    return True


def keygen(path: Path, kind: str = "ed25519") -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "cvs-test", "-f", str(path)],
                   check=True, timeout=30)


@dataclass
class Sshd:
    address: str
    port: int
    host_key: Path
    client_key: Path
    pid_file: Path
    proc: subprocess.Popen | None = None
    log: Path | None = None

    def host_key_line(self) -> str:
        kind, b64 = self.host_key.with_suffix(".pub").read_text().split()[:2]
        name = self.address if self.port == 22 else f"[{self.address}]:{self.port}"
        return f"{name} {kind} {b64}\n"

    def stop(self) -> None:
        pid = None
        if self.pid_file.exists():
            pid = int(self.pid_file.read_text().strip() or 0) or None
        if pid is None and self.proc is not None:
            pid = self.proc.pid
        if pid:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


@dataclass
class SshdFactory:
    root: Path
    client_key: Path
    started: list[Sshd] = field(default_factory=list)

    def start(self, name: str, port: int = 22, host_key: Path | None = None) -> Sshd:
        if not os.path.exists(SSHD):
            pytest.skip("openssh-server is not installed")
        os.makedirs("/run/sshd", exist_ok=True)
        base = self.root / name
        base.mkdir(parents=True, exist_ok=True)
        if host_key is None:
            host_key = base / "ssh_host_ed25519_key"
            keygen(host_key)
        address = next((a for a in CANDIDATE_ADDRESSES
                        if a not in {s.address for s in self.started if s.port == port}
                        and _free(a, port)), None)
        if address is None:
            pytest.skip(f"no free loopback address for sshd on port {port}")
        auth_keys = base / "authorized_keys"
        auth_keys.write_text(self.client_key.with_suffix(".pub").read_text())
        auth_keys.chmod(0o600)
        pid_file = base / "sshd.pid"
        config = base / "sshd_config"
        config.write_text("\n".join([
            f"ListenAddress {address}:{port}", f"HostKey {host_key}", f"PidFile {pid_file}",
            f"AuthorizedKeysFile {auth_keys}", "PermitRootLogin prohibit-password",
            "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
            "StrictModes no", "Subsystem sftp internal-sftp", "LogLevel ERROR",
            "MaxStartups 100:30:200",  # tests open connections back to back; the default drops some
            "",
        ]))
        log = base / "sshd.log"
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=subprocess.DEVNULL,
                                stderr=open(log, "wb"))
        server = Sshd(address, port, host_key, self.client_key, pid_file, proc, log)
        self.started.append(server)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"sshd exited: {log.read_text()}")
            try:
                with socket.create_connection((address, port), timeout=0.5):
                    return server
            except OSError:
                time.sleep(0.1)
        server.stop()
        pytest.fail(f"sshd on {address}:{port} did not come up: {log.read_text()}")

    def stop_all(self) -> None:
        for server in self.started:
            server.stop()


@dataclass
class FakeHost:
    name: str
    address: str
    port: int = 22
    local: bool = False


@dataclass
class FakeCluster:
    path: Path
    username: str
    priv_key_file: str | None
    hosts: list
    container: dict = field(default_factory=dict)
    known_hosts: str | None = None
