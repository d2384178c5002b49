"""One testbed node = an sshd on 127.0.0.N:22 and (usually) its own dockerd.

Each daemon gets its own config, keys, socket, data root and pidfile under the node's state
directory; readiness is polled (docker `/_ping` through the SDK, SSH banner) with a bound, never slept for.
"""
from __future__ import annotations

import json
import shlex
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cvs_tasks.errors import InfraError

from . import docker_api, procs

DOCKERD_READY_S = 60.0
SSHD_READY_S = 20.0
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TOOLS_SOURCE = Path(__file__).resolve().parent / "trainer" / "workspace" / "bin"
NODE_TOOLS = ("rocm-smi", "amd-smi", "ibv_devinfo", "dmesg")
SYS_CLASS = "/sys/class"  # where the node's shells see its RDMA counters tree (node_sys/infiniband)


@dataclass(frozen=True)
class NodePaths:
    """`root` holds configs, keys, logs and the data root; `run` (short, under /run) holds the
    docker socket and exec root, whose unix-socket paths must stay under ~104 characters."""
    root: Path
    run: Path

    @property
    def sshd_config(self) -> Path: return self.root / "sshd_config"
    @property
    def host_key(self) -> Path: return self.root / "ssh_host_ed25519_key"
    @property
    def sshd_pidfile(self) -> Path: return self.root / "sshd.pid"
    @property
    def sshd_log(self) -> Path: return self.root / "sshd.log"
    @property
    def docker_socket(self) -> Path: return self.run / "docker.sock"
    @property
    def docker_pidfile(self) -> Path: return self.root / "docker.pid"
    @property
    def docker_log(self) -> Path: return self.root / "dockerd.log"
    @property
    def docker_config(self) -> Path: return self.root / "daemon.json"
    @property
    def data_root(self) -> Path: return self.root / "data"
    @property
    def tools(self) -> Path: return self.root / "bin"  # the node's own rocm-smi/amd-smi/ibv_devinfo
    @property
    def exec_root(self) -> Path: return self.run / "exec"


SSHD_KEY_LOGIN_ONLY = (  # root by key alone; no PAM, DNS or motd to slow a session's start
    "PubkeyAuthentication yes",
    "PasswordAuthentication no",
    "KbdInteractiveAuthentication no",
    "UsePAM no",
    "PermitRootLogin prohibit-password",
    "StrictModes no",
    "UseDNS no",
    "PrintMotd no",
)


def sshd_login_lines(paths: NodePaths, authorized_keys: Path, allow_users: str = "") -> list[str]:
    """The sshd options every testbed sshd shares (the normal nodes' and the light testbed's one):
    its key and pidfile, who may log in and how. Changing a line changes the normal testbed's
    config text, and ``testbed.up`` restarts an up node's sshd whose text differs."""
    return [
        f"HostKey {paths.host_key}",
        f"PidFile {paths.sshd_pidfile}",
        f"AuthorizedKeysFile {authorized_keys}",
        *([f"AllowUsers {allow_users}"] if allow_users else []),
        *SSHD_KEY_LOGIN_ONLY,
    ]


def sshd_config_text(address: str, paths: NodePaths, authorized_keys: Path, docker_host: str,
                     node_sys: Path | None = None) -> str:
    sys_env = f" CVS_SIM_NODE_SYS={node_sys}" if node_sys else ""
    return "\n".join([
        "# cvs-testbed node sshd (generated)",
        f"ListenAddress {address}:22",
        *sshd_login_lines(paths, authorized_keys),
        "MaxStartups 200:30:400",
        "MaxSessions 64",
        "LogLevel ERROR",
        f"SetEnv DOCKER_HOST={docker_host} CVS_SIM_NODE_DIR={paths.root}{sys_env} PATH={paths.tools}:{SYSTEM_PATH}",
        "Subsystem sftp /usr/lib/openssh/sftp-server",
        "",
    ])


def host_key(paths: NodePaths) -> str:
    """The node's ed25519 host key (created once); returns the public key line."""
    if not paths.host_key.is_file():
        paths.root.mkdir(parents=True, exist_ok=True)
        check(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"cvs-testbed-{paths.root.name}",
                "-f", str(paths.host_key)], "ssh-keygen (host key)")
    return Path(str(paths.host_key) + ".pub").read_text().strip()


def install_node_tools(paths: NodePaths) -> None:
    """The GPU/NIC tool stand-ins on the node's own shell PATH; they read the node's versions.json."""
    paths.tools.mkdir(parents=True, exist_ok=True)
    for tool in NODE_TOOLS:
        link = paths.tools / tool
        link.unlink(missing_ok=True)
        link.symlink_to(TOOLS_SOURCE / tool)


def sshd_command(paths: NodePaths, node_sys: Path | None = None) -> list[str]:
    """sshd in the foreground; with ``node_sys``, in its own mount namespace where
    ``/sys/class/infiniband`` is the node's counters tree (a tmpfs over ``/sys/class`` holding one
    link), so the harness reads every node's counters at the real path. The namespace dies with
    sshd: nothing to unmount."""
    sshd = ["/usr/sbin/sshd", "-D", "-f", str(paths.sshd_config), "-E", str(paths.sshd_log)]
    if node_sys is None:
        return sshd
    inner = (f"mount -t tmpfs -o size=64k,mode=0755 cvs-testbed-sysclass {SYS_CLASS} && "
             f"ln -s {shlex.quote(str(node_sys / 'infiniband'))} {SYS_CLASS}/infiniband && "
             f"exec {shlex.join(sshd)}")
    return ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", inner]


def start_sshd(address: str, paths: NodePaths, authorized_keys: Path, docker_host: str,
               node_sys: Path | None = None) -> int:
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)
    install_node_tools(paths)
    paths.sshd_config.write_text(sshd_config_text(address, paths, authorized_keys, docker_host, node_sys))
    check(["/usr/sbin/sshd", "-t", "-f", str(paths.sshd_config)], f"sshd config check for {address}")
    pid = procs.spawn(sshd_command(paths, node_sys), paths.root / "sshd.stdout")
    wait_ssh(address, pid, paths)
    return pid


def start_dockerd(paths: NodePaths) -> int:
    for d in (paths.data_root, paths.exec_root, paths.run):
        d.mkdir(parents=True, exist_ok=True)
    paths.docker_config.write_text(json.dumps({}))
    paths.docker_socket.unlink(missing_ok=True)
    cmd = ["/usr/sbin/dockerd", "--config-file", str(paths.docker_config),
           "--data-root", str(paths.data_root), "--exec-root", str(paths.exec_root),
           "-H", f"unix://{paths.docker_socket}", "--pidfile", str(paths.docker_pidfile),
           "--bridge=none", "--iptables=false", "--log-level=warn"]
    pid = procs.spawn(cmd, paths.docker_log)
    wait_docker(paths, pid)
    return pid


def docker_ping(sock_path: Path, timeout: float = 2.0) -> bool:
    return docker_api.ping(docker_api.socket_url(sock_path), timeout)


def ssh_banner(address: str, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((address, 22), timeout=timeout) as sock:
            return sock.recv(64).startswith(b"SSH-2.0")
    except OSError:
        return False


def wait_docker(paths: NodePaths, pid: int) -> None:
    deadline = time.monotonic() + DOCKERD_READY_S
    while time.monotonic() < deadline:
        if docker_ping(paths.docker_socket):
            return
        if not procs.alive(pid):
            raise InfraError(f"dockerd for {paths.root.name} exited during start-up; see {paths.docker_log}: "
                             + _tail(paths.docker_log))
        time.sleep(0.1)
    raise InfraError(f"dockerd for {paths.root.name} did not answer on {paths.docker_socket} within "
                     f"{DOCKERD_READY_S:.0f} s; see {paths.docker_log}")


def wait_ssh(address: str, pid: int, paths: NodePaths) -> None:
    deadline = time.monotonic() + SSHD_READY_S
    while time.monotonic() < deadline:
        if ssh_banner(address):
            return
        if not procs.alive(pid):
            raise InfraError(f"sshd for {address} exited during start-up; see {paths.sshd_log}: "
                             + _tail(paths.sshd_log))
        time.sleep(0.05)
    raise InfraError(f"sshd on {address}:22 not answering after {SSHD_READY_S:.0f} s; see {paths.sshd_log}")


def remove_containers(docker_host: str) -> list[str]:
    """Force-remove every container of one testbed daemon; returns their names."""
    return docker_api.remove_all(docker_host)


def check(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise InfraError(f"{what} failed (exit {done.returncode}): {(done.stderr or done.stdout).strip()}")


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"
