"""A real TCP rendezvous between the simulated nodes (stands in for c10d + NCCL).

Node 0 listens at MASTER_ADDR:MASTER_PORT; the others connect (bounded retries). At every
iteration each node reports `STEP n` to node 0, which answers `GO n` once all have arrived; so a
dead, hung or slow node really stalls the others, which then fail after the collective timeout
(or at once, when a peer's connection closes). Every wait is bounded.
"""
from __future__ import annotations

import errno
import select
import socket
import time


class RendezvousError(Exception):
    """Could not form the group: kind is `timeout`, `connect` or `port_in_use`."""

    def __init__(self, kind: str, waited_s: float, joined: int = 0):
        super().__init__(kind)
        self.kind, self.waited_s, self.joined = kind, waited_s, joined


class CollectiveTimeout(Exception):
    def __init__(self, step: int, waited_s: float):
        super().__init__(f"step {step}")
        self.step, self.waited_s = step, waited_s


class PeerGone(Exception):
    def __init__(self, peer: str):
        super().__init__(peer)
        self.peer = peer


class Group:
    def __init__(self, nnodes: int, node_rank: int, addr: str, port: int):
        self.nnodes, self.node_rank, self.addr, self.port = nnodes, node_rank, addr, port
        self._server: socket.socket | None = None
        self._peers: dict[int, socket.socket] = {}      # node 0: rank -> socket
        self._master: socket.socket | None = None        # others: the socket to node 0
        self._buffers: dict[socket.socket, bytes] = {}

    # -- forming the group -------------------------------------------------------------
    def join(self, timeout_s: float) -> None:
        if self.nnodes <= 1:
            return
        if self.node_rank == 0:
            self._serve(timeout_s)
        else:
            self._connect(timeout_s)

    def _serve(self, timeout_s: float) -> None:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind((self.addr, self.port))
        except OSError as exc:
            server.close()
            if exc.errno == errno.EADDRINUSE:
                raise RendezvousError("port_in_use", 0) from None
            raise
        server.listen(max(self.nnodes, 8))
        self._server = server
        deadline = time.monotonic() + timeout_s
        pending: list[socket.socket] = []
        while len(self._peers) < self.nnodes - 1:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RendezvousError("timeout", timeout_s, len(self._peers) + 1)
            ready, _, _ = select.select([server, *pending], [], [], min(left, 0.5))
            for sock in ready:
                if sock is server:
                    conn, _ = server.accept()
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    pending.append(conn)
                    continue
                message = self._read_line(sock, deadline)
                pending.remove(sock)
                if message and message.startswith("HELLO "):
                    self._peers[int(message.split()[1])] = sock
                else:
                    sock.close()

    def _connect(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                sock = socket.create_connection((self.addr, self.port), timeout=2.0)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    raise RendezvousError("connect", timeout_s) from None
                time.sleep(0.2)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)
        sock.sendall(f"HELLO {self.node_rank}\n".encode())
        self._master = sock

    # -- per-iteration synchronisation -------------------------------------------------
    def barrier(self, step: int, timeout_s: float) -> None:
        """All nodes reach `step` or this raises CollectiveTimeout / PeerGone."""
        if self.nnodes <= 1:
            return
        deadline = time.monotonic() + timeout_s
        if self.node_rank == 0:
            arrived: set[int] = set()
            by_sock = {sock: rank for rank, sock in self._peers.items()}
            while len(arrived) < len(self._peers):
                waiting = [s for s, r in by_sock.items() if r not in arrived]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CollectiveTimeout(step, timeout_s)
                ready, _, _ = select.select(waiting, [], [], min(left, 0.5))
                for sock in ready:
                    message = self._read_line(sock, deadline)
                    if message is None:
                        raise PeerGone(f"node {by_sock[sock]} ({self.addr})")
                    if message == f"STEP {step}":
                        arrived.add(by_sock[sock])
            for sock in self._peers.values():
                try:
                    sock.sendall(f"GO {step}\n".encode())
                except OSError:
                    raise PeerGone(f"node {by_sock[sock]}") from None
        else:
            assert self._master is not None
            try:
                self._master.sendall(f"STEP {step}\n".encode())
            except OSError:
                raise PeerGone(f"{self.addr}<{self.port}>") from None
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CollectiveTimeout(step, timeout_s)
                ready, _, _ = select.select([self._master], [], [], min(left, 0.5))
                if not ready:
                    continue
                message = self._read_line(self._master, deadline)
                if message is None:
                    raise PeerGone(f"{self.addr}<{self.port}>")
                if message == f"GO {step}":
                    return

    def _read_line(self, sock: socket.socket, deadline: float) -> str | None:
        """One newline-terminated message; None when the peer closed the connection."""
        buffer = self._buffers.get(sock, b"")
        while b"\n" not in buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return ""
            ready, _, _ = select.select([sock], [], [], min(left, 0.5))
            if not ready:
                continue
            try:
                chunk = sock.recv(4096)
            except OSError:
                chunk = b""
            if not chunk:
                self._buffers.pop(sock, None)
                return None
            buffer += chunk
        text, _, rest = buffer.partition(b"\n")
        self._buffers[sock] = rest
        return text.decode(errors="replace").strip()

    def close(self) -> None:
        for sock in [*self._peers.values(), self._master, self._server]:
            if sock is not None:
                try:
                    sock.close()
                except OSError:
                    pass
        self._peers.clear()
        self._master = self._server = None
