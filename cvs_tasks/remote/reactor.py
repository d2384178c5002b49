"""Every SSH connection's incoming packets read by a few threads, not by one thread each.

paramiko gives each ``Transport`` a thread of its own that blocks in ``recv`` and dispatches
what arrives: 1,024 nodes cost 1,024 threads, each about 130 KiB and a wake-up a second
(docs/measured.md). ``ReactorTransport`` starts no thread. After the version banner (read in the
thread that connects, inside the fan-out window) its socket joins one epoll set, one-shot: the
``WORKERS`` threads all wait on that set, the one woken reads the connection's waiting messages,
dispatches them exactly as paramiko's own loop does (``_dispatch``, the body of
``Transport.run``) and arms the socket again. No hand-off between threads, no wake-up while
nothing arrives. A worker may wait for the rest of a packet; a connection that keeps one waiting
longer than ``STALL_S`` is shut down, so stuck peers cannot hold the pool. Keepalives and
rekeys, which paramiko's thread does when its ``recv`` times out, are looked at once a second.

What paramiko's loop looks like is pinned by a test (tests/unit/remote/test_reactor.py compares
the tokens of ``Transport.run`` with the versions this was read against: 3.4.1 to 5.1.0).
Linux only (epoll), like the head nodes this runs on.
"""

from __future__ import annotations

import os
import queue
import select
import threading
import time
from typing import Callable

import paramiko
from paramiko.common import (
    MSG_DEBUG,
    MSG_DISCONNECT,
    MSG_IGNORE,
    MSG_UNIMPLEMENTED,
    cMSG_UNIMPLEMENTED,
)
from paramiko.message import Message
from paramiko.packet import NeedRekeyException
from paramiko.ssh_exception import MessageOrderError, SSHException

WORKERS = 4  # threads that read and dispatch messages, whatever the number of connections
BURST = 64  # messages one worker handles on a connection before giving the others a turn
STALL_S = 30.0  # a worker waiting this long for the rest of one connection's packet: shut it down
TEND_S = 1.0  # how often stalls, keepalives and pending rekeys are looked at
_ARMED = select.EPOLLIN | select.EPOLLONESHOT


class PacketReactor:
    """The epoll set, its workers, and the thread that tends idle connections; one per process."""

    def __init__(self, workers: int = WORKERS):
        self._epoll = select.epoll()
        self._lock = threading.Lock()
        self._by_fd: dict[int, ReactorTransport] = {}
        self._busy: dict[ReactorTransport, float] = {}  # in a worker since (monotonic)
        self._chores: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self.threads = [threading.Thread(target=self._work, name=f"cvs-ssh-packets-{k}", daemon=True)
                        for k in range(workers)]
        self.threads += [threading.Thread(target=self._watch, name="cvs-ssh-tend", daemon=True),
                         threading.Thread(target=self._do_chores, name="cvs-ssh-keepalive", daemon=True)]
        for thread in self.threads:
            thread.start()

    @property
    def connections(self) -> int:
        return len(self._by_fd)

    def adopt(self, transport: "ReactorTransport") -> None:
        """Start reading this connection's packets (its banner was read in the caller's thread,
        perhaps with the start of the next packet: that is handled here first)."""
        if transport.has_buffered() and not transport.read_waiting(BURST):
            return
        with self._lock:
            fd = transport.sock.fileno()
            if fd < 0 or not transport.active:
                return
            transport.reactor_fd = fd
            self._by_fd[fd] = transport
            self._epoll.register(fd, _ARMED)

    def forget(self, transport: "ReactorTransport") -> None:
        """Stop reading it; called before its socket closes, and again after (harmless)."""
        with self._lock:
            self._busy.pop(transport, None)
            fd = transport.reactor_fd
            if fd is not None and self._by_fd.get(fd) is transport:
                del self._by_fd[fd]
                try:
                    self._epoll.unregister(fd)
                except OSError:
                    pass  # closed already: the kernel dropped it

    def _work(self) -> None:
        while True:
            for fd, _ in self._epoll.poll(-1, 1):
                with self._lock:
                    transport = self._by_fd.get(fd)
                    if transport is None:
                        continue
                    self._busy[transport] = time.monotonic()
                self._serve(fd, transport)

    def _serve(self, fd: int, transport: "ReactorTransport") -> None:
        if not transport.serving.acquire(blocking=False):
            return  # another worker has it (a stale event of a reused descriptor); it re-arms
        try:
            alive = transport.read_waiting(BURST)
        finally:
            transport.serving.release()
        with self._lock:
            self._busy.pop(transport, None)
            if alive and self._by_fd.get(fd) is transport:
                try:
                    self._epoll.modify(fd, _ARMED)
                except OSError:
                    pass

    def _watch(self) -> None:
        """Once a second: shut down connections stuck mid-packet; queue keepalives and rekeys."""
        while True:
            time.sleep(TEND_S)
            now = time.monotonic()
            with self._lock:
                stalled = [(t, now - since) for t, since in self._busy.items() if now - since > STALL_S]
                idle = [t for t in self._by_fd.values() if t not in self._busy]
            for transport, waited in stalled:
                transport.shut_down_stalled(waited)
            for transport in idle:
                if transport.wants_tending(now):
                    self._chores.put(transport.tend)

    def _do_chores(self) -> None:
        """Keepalives and rekey requests are sends that may wait on the peer: not in ``_watch``."""
        while True:
            self._chores.get()()


_reactor: PacketReactor | None = None
_reactor_lock = threading.Lock()


def reactor() -> PacketReactor:
    """The process's one reactor, started on first use."""
    global _reactor
    with _reactor_lock:
        if _reactor is None:
            _reactor = PacketReactor()
        return _reactor


def _forget_in_child() -> None:
    """A forked child has none of the parent's threads: its first connection starts its own."""
    global _reactor, _reactor_lock
    _reactor, _reactor_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)


class ReactorTransport(paramiko.Transport):
    """paramiko's Transport without a thread of its own: ``PacketReactor`` reads its packets.

    Its socket timeout (``_active_check_timeout``) only matters while a worker waits for the rest
    of a packet: once a second it checks for a close, as paramiko's thread does."""

    _active_check_timeout = 1.0
    reactor_fd: int | None = None  # the descriptor the reactor knows it by (a closed socket says -1)
    _keepalive_s = 0.0
    _next_tend = 0.0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.serving = threading.Lock()  # held by the worker reading this connection
        self._reader: threading.Thread | None = None  # the thread dispatching its messages now
        self._held: list = []  # messages that thread had to send during a key exchange

    def start(self) -> None:
        """What ``threading.Thread.start`` would run before paramiko's loop, done here in the
        caller's thread (the version banner waits on the node); the loop is the reactor's."""
        try:
            self.packetizer.write_all((self.local_version + "\r\n").encode())
            self._log(paramiko.common.DEBUG, f"Local version/idstring: {self.local_version}")
            self._check_banner()
            self.packetizer.start_handshake(self.handshake_timeout)
            self._send_kex_init()
            self._expect_packet(paramiko.common.MSG_KEXINIT)
        except Exception as exc:  # noqa: BLE001 - as paramiko's thread, every failure ends the transport
            self._end(exc)
            return
        reactor().adopt(self)

    def read_waiting(self, most: int) -> bool:
        """Handle the messages waiting on the socket (at most ``most``); False once it ended."""
        self._reader = threading.current_thread()
        try:
            for _ in range(most):
                if not self.active or not self._dispatch():
                    self._end(None)
                    return False
                if not self.has_buffered() and not _readable(self.sock):
                    break
        except (SSHException, EOFError, OSError) as exc:
            self._end(exc)
            return False
        except Exception as exc:  # noqa: BLE001 - paramiko's loop ends on any failure too
            self._log(paramiko.common.ERROR, f"unknown exception: {exc}")
            self._end(exc)
            return False
        finally:
            self._reader = None
        return True

    def _send_user_message(self, data) -> None:
        """paramiko's, except in the thread dispatching this connection's messages while a key
        exchange runs. paramiko waits there for the exchange to end, which only that thread can
        end: a channel the node closes just after this end asked for new keys is answered with
        a close from the dispatch, and the connection hung for 30 s and died (paramiko's own
        thread does the same; tests/integration/remote/test_remote_reactor_sshd.py). The
        message is held and sent once the new keys are in use, as RFC 4253 wants."""
        if self._reader is threading.current_thread():
            with self.clear_to_send_lock:
                if not self.clear_to_send.is_set():
                    self._held.append(data)
                    return
        super()._send_user_message(data)

    def _parse_newkeys(self, m) -> None:
        super()._parse_newkeys(m)
        held, self._held = self._held, []
        for data in held:
            super()._send_user_message(data)

    def has_buffered(self) -> bool:
        """Bytes the packetizer already read off the socket (the selector cannot see them)."""
        return bool(getattr(self.packetizer, "_Packetizer__remainder", b""))

    def wants_tending(self, now: float) -> bool:
        """A rekey was asked for, or a keepalive may be due: one cheap look, once a second."""
        if not self.active or self.in_kex:
            return False
        return self.packetizer.need_rekey() or (self._keepalive_s > 0 and now >= self._next_tend)

    def tend(self) -> None:
        """What paramiko's thread does each time its ``recv`` times out, here in the reactor's
        keepalive thread (a send may wait on the peer). paramiko sends the keepalive only if
        nothing was sent for its interval; looking twice per interval keeps one at most half an
        interval late."""
        self._next_tend = time.monotonic() + self._keepalive_s / 2
        try:
            # a rekey starts where no worker reads this connection (a worker that does starts it
            # itself); the keepalive may wait for a key exchange that only a worker can finish
            if self.packetizer.need_rekey() and self.serving.acquire(blocking=False):
                try:
                    if not self.in_kex:
                        self._send_kex_init()
                finally:
                    self.serving.release()
            self.packetizer._check_keepalive()
        except (SSHException, EOFError, OSError) as exc:
            self._end(exc)

    def set_keepalive(self, interval: int) -> None:
        self._keepalive_s = float(interval)
        self._next_tend = time.monotonic() + self._keepalive_s / 2
        super().set_keepalive(interval)

    def shut_down_stalled(self, waited: float) -> None:
        """The peer sent part of a packet and then nothing for ``waited`` seconds."""
        self.saved_exception = SSHException(f"the node sent part of a packet and then nothing for {waited:.0f}s")
        try:
            self.sock.shutdown(2)  # the waiting worker's recv returns at once, with the end
        except OSError:
            pass

    def close(self) -> None:
        if self.active and self.reactor_fd is not None:
            reactor().forget(self)  # before the socket closes: its number can be reused at once
        super().close()

    # -- paramiko's loop, one message at a time ------------------------------------------------
    def _dispatch(self) -> bool:
        """Read one message and act on it as the body of ``Transport.run`` does; False where that
        loop would stop (the peer disconnected, or named a channel it never had)."""
        if self.packetizer.need_rekey() and not self.in_kex:
            self._send_kex_init()
        try:
            ptype, m = self.packetizer.read_message()
        except NeedRekeyException:
            return True
        if ptype == MSG_IGNORE:
            self._enforce_strict_kex(ptype)
            return True
        if ptype == MSG_DISCONNECT:
            self._parse_disconnect(m)
            return False
        if ptype == MSG_DEBUG:
            self._enforce_strict_kex(ptype)
            self._parse_debug(m)
            return True
        if self._expected_packet:
            if ptype not in self._expected_packet:
                kind = MessageOrderError if self.agreed_on_strict_kex else SSHException
                raise kind(f"Expecting packet from {self._expected_packet!r}, got {ptype:d}")
            self._expected_packet = tuple()
            if 30 <= ptype <= 41:  # key exchange messages, which differ by algorithm
                self.kex_engine.parse_next(ptype, m)
                return True
        if ptype in self._handler_table:
            error_msg = self._ensure_authed(ptype, m)
            if error_msg:
                self._send_message(error_msg)
            else:
                self._handler_table[ptype](m)
        elif ptype in self._channel_handler_table:
            chanid = m.get_int()
            chan = self._channels.get(chanid)
            if chan is not None:
                self._channel_handler_table[ptype](chan, m)
            elif chanid not in self.channels_seen:
                self._log(paramiko.common.ERROR, f"Channel request for unknown channel {chanid:d}")
                return False
        elif self.auth_handler is not None and ptype in self.auth_handler._handler_table:
            self.auth_handler._handler_table[ptype](m)
            if self._expected_packet:
                return True
        elif ptype != MSG_UNIMPLEMENTED:
            msg = Message()
            msg.add_byte(cMSG_UNIMPLEMENTED)
            msg.add_int(m.seqno)
            self._send_message(msg)
        self.packetizer.complete_handshake()
        return True

    def _end(self, exc: BaseException | None) -> None:
        """What paramiko's thread does when its loop ends: wake every waiter, close the socket."""
        if exc is not None and self.saved_exception is None:
            self.saved_exception = exc
        if self.reactor_fd is not None:
            reactor().forget(self)  # before the socket closes (the packetizer's close does)
        for chan in list(self._channels.values()):
            chan._unlink()
        if self.active:
            self.active = False
            self.packetizer.close()
            if self.completion_event is not None:
                self.completion_event.set()
            if self.auth_handler is not None:
                self.auth_handler.abort()
            for event in self.channel_events.values():
                event.set()
            with self.lock:
                self.server_accept_cv.notify()
        self.sock.close()


def _readable(sock) -> bool:
    """More bytes wait on the socket now (one poll, no wait; ``select.select`` stops at fd 1,024)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))
