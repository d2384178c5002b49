"""The light scale testbed: N node addresses on loopback served by ONE sshd, and ONE log writer.

For scale runs (issue #25): no dockerd per node (jobs use the host runtime), no sshd per node.
Nodes are 127.1.x.y (``light_address``), away from the normal testbed's 127.0.0.2… on port 22
and the Slurm testbed's ports. OpenSSH listens on at most 16 addresses (MAX_LISTEN_SOCKS), so up
to 16 nodes the one sshd listens on their addresses alone, and past that on the wildcard address
of its own port (default 2322); either way it admits only loopback clients (``AllowUsers
root@127.0.0.0/8``, key only). One ``Match LocalAddress`` block per node gives each node's
sessions its own ``CVS_SIM_NODE_DIR`` (and a HOME of their own, so a session's bash does not
source the machine's ~/.bashrc). One host key serves every address and ``known_hosts`` records
it for each. The writer (``testbed/light_writer.py``) appends Megatron-LM iteration lines to
``nodes/node<i>/train.log`` for every node at a set rate.

``up`` starts both (raising the descriptor limit sshd needs in its own start), writes
``cluster.json`` and ``known_hosts`` and records the pids; ``down`` stops exactly those pids and
the sessions under that sshd, then removes the state.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from cvs_tasks.errors import BadInput, InfraError

from . import daemons, procs

DEFAULT_STATE_DIR = "/tmp/cvs-light-testbed"
DEFAULT_PORT = 2322
MAX_NODES = 4096
PER_OCTET = 250  # node i is 127.1.<i // 250>.<i % 250 + 1>
SSHD_NOFILE = 1 << 16
MAX_LISTEN = 16  # addresses one sshd listens on (OpenSSH: MAX_LISTEN_SOCKS)
MAX_STARTUPS = 128  # unauthenticated connections sshd accepts at once: well above the fan-out window
REPO = Path(__file__).resolve().parents[1]


def state_dir_default() -> Path:
    return Path(os.environ.get("CVS_LIGHT_TESTBED_DIR", DEFAULT_STATE_DIR))


def light_address(index: int) -> str:
    return f"127.1.{index // PER_OCTET}.{index % PER_OCTET + 1}"


@dataclass
class LightInfo:
    state_dir: str
    nodes: int
    port: int
    rate: float
    sshd_pid: int = 0
    writer_pid: int = 0
    cluster_file: str = ""
    known_hosts: str = ""
    key_file: str = ""

    @property
    def logs(self) -> Path:
        """Where the writer keeps node i's log: ``logs / f"node{i}" / "train.log"``."""
        return Path(self.state_dir) / "nodes"

    @property
    def addresses(self) -> list[str]:
        return [light_address(i) for i in range(self.nodes)]


def _sshd_paths(state: Path) -> daemons.NodePaths:
    return daemons.NodePaths(state / "sshd", state / "sshd")


def sshd_config_text(state: Path, nodes: int, port: int, authorized_keys: Path) -> str:
    """One sshd for every node: loopback clients only, a Match block per node. Up to
    ``MAX_LISTEN`` nodes it listens on their addresses alone; past that (OpenSSH's limit) on the
    wildcard address of ``port``, so the port is open on every interface while it runs."""
    paths = _sshd_paths(state)
    listen = ([f"ListenAddress {light_address(i)}:{port}" for i in range(nodes)] if nodes <= MAX_LISTEN
              else [f"ListenAddress 0.0.0.0:{port}"])
    head = [
        f"# cvs light testbed sshd: {nodes} node(s) on 127.1.x.y:{port} (generated)",
        *listen,
        *daemons.sshd_login_lines(paths, authorized_keys, allow_users="root@127.0.0.0/8"),
        f"MaxStartups {MAX_STARTUPS}:30:{4 * MAX_STARTUPS}",  # above any fan-out window (default 32)
        "MaxSessions 16",
        "LogLevel ERROR",
        "Subsystem sftp /usr/lib/openssh/sftp-server",
    ]
    home = state / "home"  # not root's: bash run by sshd sources ~/.bashrc (pyenv init: ~50 ms a command)
    blocks = []
    for index in range(nodes):
        node_dir = state / "nodes" / f"node{index}"
        blocks += [f"Match LocalAddress {light_address(index)}",
                   f"  SetEnv CVS_SIM_NODE_DIR={node_dir} CVS_LIGHT_NODE={index} HOME={home} "
                   f"PATH={paths.tools}:{daemons.SYSTEM_PATH}"]
    return "\n".join(head + blocks + [""])


def _banner(address: str, port: int, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((address, port), timeout=timeout) as sock:
            return sock.recv(64).startswith(b"SSH-2.0")
    except OSError:
        return False


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as sshd binds: TIME_WAIT is no owner
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _load(state: Path) -> LightInfo | None:
    try:
        return LightInfo(**json.loads((state / "light.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _save(state: Path, info: LightInfo) -> None:
    tmp = state / "light.json.tmp"
    tmp.write_text(json.dumps(asdict(info), indent=2))
    tmp.replace(state / "light.json")


def _write_cluster_files(info: LightInfo, host_key_line: str) -> None:
    key = " ".join(host_key_line.split()[:2])
    Path(info.known_hosts).write_text("".join(f"[{a}]:{info.port} {key}\n" for a in info.addresses))
    cluster = {"_comment": f"cvs light testbed: {info.nodes} loopback nodes behind one sshd; generated by "
                           "`invoke testbed.up --light`",
               "username": "root", "priv_key_file": info.key_file, "password": None,
               "known_hosts": info.known_hosts, "head_node_dict": {"mgmt_ip": light_address(0)},
               "node_dict": {a: {"port": info.port} for a in info.addresses}}
    path = Path(info.cluster_file)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(cluster, indent=1) + "\n")
    tmp.replace(path)


def _start_sshd(state: Path, info: LightInfo, authorized: Path) -> int:
    paths = _sshd_paths(state)
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)
    daemons.install_node_tools(paths)  # rocm-smi, amd-smi, ibv_devinfo, dmesg stand-ins, one set for all
    paths.sshd_config.write_text(sshd_config_text(state, info.nodes, info.port, authorized))
    daemons.check(["/usr/sbin/sshd", "-t", "-f", str(paths.sshd_config)], "the light testbed's sshd config check")
    # sshd and each session inherit the limit: a session's follower and command hold a few descriptors
    nofile = _nofile_for_sshd()
    cmd = ["prlimit", f"--nofile={nofile}:{nofile}", "--",
           "/usr/sbin/sshd", "-D", "-f", str(paths.sshd_config), "-E", str(paths.sshd_log)]
    pid = procs.spawn(cmd, paths.root / "sshd.stdout")
    deadline = time.monotonic() + daemons.SSHD_READY_S
    while not _banner(light_address(0), info.port):
        if not procs.alive(pid):
            raise InfraError(f"the light testbed's sshd exited during start-up; see {paths.sshd_log}")
        if time.monotonic() > deadline:
            raise InfraError(f"the light testbed's sshd did not answer on port {info.port} within "
                             f"{daemons.SSHD_READY_S:.0f} s; see {paths.sshd_log}")
        time.sleep(0.05)
    return pid


def _nofile_for_sshd() -> int:
    """The descriptor limit sshd starts with: SSHD_NOFILE, or the hard limit when that is lower
    (raising a hard limit needs CAP_SYS_RESOURCE, which a container's root often lacks)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return SSHD_NOFILE if hard == resource.RLIM_INFINITY else min(SSHD_NOFILE, hard)


def _start_writer(info: LightInfo) -> int:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "testbed.light_writer", str(info.logs), "--nodes", str(info.nodes),
           "--rate", f"{info.rate:g}"]
    return procs.spawn(cmd, Path(info.state_dir) / "writer.log", env=env)


def up(nodes: int = 64, state_dir: str | Path | None = None, port: int = DEFAULT_PORT, rate: float = 1.0,
       log=print) -> LightInfo:
    """Start the light testbed (a running one of another size, port or rate is refused: `down` first)."""
    from .cluster import _client_key

    if not 1 <= nodes <= MAX_NODES:
        raise BadInput(f"--nodes must be between 1 and {MAX_NODES} for the light testbed, got {nodes}")
    if rate <= 0:
        raise BadInput(f"--rate must be above 0 lines a second, got {rate:g}")
    if os.geteuid() != 0 or shutil.which("prlimit") is None or not Path("/usr/sbin/sshd").is_file():
        raise InfraError("the light testbed needs root, /usr/sbin/sshd and prlimit (util-linux)")
    state = Path(state_dir or state_dir_default()).resolve()
    old = _load(state)
    if old is not None and procs.alive(old.sshd_pid, str(state)):
        if (old.nodes, old.port, old.rate) != (nodes, port, rate):
            raise BadInput(f"the light testbed in {state} runs {old.nodes} node(s) on port {old.port} at "
                           f"{old.rate:g} line(s)/s; run `invoke testbed.down --light` first")
        if not procs.alive(old.writer_pid, str(state)):
            old.writer_pid = _start_writer(old)
            _save(state, old)
        log(f"testbed: light testbed already up ({old.nodes} nodes), cluster file {old.cluster_file}")
        return old
    if old is not None:  # its sshd is gone: stop what is left of it (the writer) before starting anew
        down(state, log=lambda *_: None)
    if not _port_free(port):
        raise InfraError(f"port {port} is taken; pass another --port for the light testbed")
    (state / "home").mkdir(parents=True, exist_ok=True)
    key, authorized = _client_key(state)
    info = LightInfo(str(state), nodes, port, rate, cluster_file=str(state / "cluster.json"),
                     known_hosts=str(state / "known_hosts"), key_file=str(key))
    started = time.monotonic()
    host_key_line = daemons.host_key(_sshd_paths(state))
    _write_cluster_files(info, host_key_line)
    _save(state, info)
    info.sshd_pid = _start_sshd(state, info, authorized)
    _save(state, info)
    info.writer_pid = _start_writer(info)
    _save(state, info)
    log(f"testbed: light testbed up in {time.monotonic() - started:.1f} s: {nodes} nodes "
        f"({light_address(0)}…{light_address(nodes - 1)}, port {port}) behind sshd {info.sshd_pid}, "
        f"writer {info.writer_pid} at {rate:g} line(s)/s per node")
    log(f"testbed: cluster file {info.cluster_file}")
    return info


def down(state_dir: str | Path | None = None, log=print) -> list[str]:
    """Stop the writer, the sshd and the sessions under it (by recorded pid), remove the state."""
    state = Path(state_dir or state_dir_default()).resolve()
    info = _load(state)
    actions: list[str] = []
    if info is None:
        return actions
    if procs.stop(info.writer_pid, str(state)):
        actions.append(f"stopped writer {info.writer_pid}")
    if procs.alive(info.sshd_pid, str(state)):
        sessions = procs.children_of(info.sshd_pid)
        procs.stop(info.sshd_pid, str(state))
        for pid in sessions:
            procs.kill_quietly(pid)
        actions.append(f"stopped sshd {info.sshd_pid} and {len(sessions)} session process(es)")
    shutil.rmtree(state, ignore_errors=True)
    actions.append(f"removed {state}")
    for action in actions:
        log(f"testbed: {action}")
    return actions


def status(state_dir: str | Path | None = None) -> dict:
    state = Path(state_dir or state_dir_default()).resolve()
    info = _load(state)
    if info is None:
        return {"state_dir": str(state), "running": False}
    return dict(asdict(info), running=True, sshd=procs.alive(info.sshd_pid, str(state))
                and _banner(light_address(0), info.port), writer=procs.alive(info.writer_pid, str(state)))
