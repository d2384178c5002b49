"""64 SSH nodes on one loopback sshd: the harness's own threads do not grow with the node count.

No connection has a thread of its own: the packets of all of them are read by the reactor's few
threads (``remote/reactor.py``). Everything else the harness adds (the fan-out
window's set-up threads, the selector loops of commands and followers) is bounded by the window,
whatever the number of nodes: a set-up thread per node in the window, and paramiko's own
handshake timer (a ``threading.Timer``) while that node's handshake runs.
"""

from __future__ import annotations

import threading
import time

import paramiko
from remote_sshd import FakeHost

from cvs_tasks.remote import connect
from cvs_tasks.remote.follow import Delta, FollowOptions, FollowTarget
from cvs_tasks.remote.reactor import reactor

NODES = 64
WINDOW = 8


class ThreadCounter:
    """Samples the threads started since it was made (paramiko's per-connection readers counted
    apart) until stopped: other tests' leftovers in this process are not counted."""

    def __init__(self) -> None:
        self.most_own = self.most_transports = 0
        self.names: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="thread-counter", daemon=True)
        self._before = set(threading.enumerate())

    def _loop(self) -> None:
        while not self._stop.wait(0.01):
            threads = [t for t in threading.enumerate() if t is not self._thread and t not in self._before]
            transports = sum(isinstance(t, paramiko.Transport) for t in threads)
            self.most_transports = max(self.most_transports, transports)
            if len(threads) - transports > self.most_own:
                self.most_own = len(threads) - transports
                self.names = sorted(t.name for t in threads if not isinstance(t, paramiko.Transport))

    def __enter__(self) -> "ThreadCounter":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)


def test_commands_and_followers_on_64_nodes_use_a_bounded_number_of_threads(sshd, make_cluster, trusted, tmp_path):
    cluster = make_cluster([], trusted, extra_hosts=[FakeHost(f"node{i}", sshd.address, sshd.port)
                                                     for i in range(NODES)])
    cluster.priv_key_file = str(sshd.client_key)
    cluster.fanout_window = WINDOW
    logs = [tmp_path / f"node{i}.log" for i in range(NODES)]
    with ThreadCounter() as counter, connect(cluster, connect_timeout=20) as hosts:
        results = hosts.run("sleep 0.3; echo ok", timeout=60)
        assert [r.stdout for r in results] == ["ok\n"] * NODES, [r.error for r in results if r.error]
        put = hosts.run([f"echo node{i} > {log}" for i, log in enumerate(logs)], timeout=60)
        assert all(r.ok for r in put)
        seen: set[int] = set()
        targets = [FollowTarget(str(log), f"{log}.exit") for log in logs]
        with hosts.follow(targets, FollowOptions(poll_s=0.5, heartbeat_s=2)) as follow:
            deadline = time.monotonic() + 90  # 64 sessions start one by one on a loaded 2-core machine
            while len(seen) < NODES and time.monotonic() < deadline:
                seen |= {e.index for e in follow.events(1.0) if isinstance(e, Delta)}
            again = hosts.run("echo again", timeout=60)  # commands beside 64 running followers
    assert len(seen) == NODES and all(r.stdout == "again\n" for r in again)
    assert counter.most_transports == 0  # no paramiko reader thread per connection
    # the window's threads, paramiko's handshake timer of each connection being set up in it, and
    # the reactor's (started by the first connection of this process, if no test before did)
    assert counter.most_own <= 2 * WINDOW + len(reactor().threads), (counter.most_own, counter.names)
