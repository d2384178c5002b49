"""Every SSH connection's incoming packets read by one selector thread and a few workers.

paramiko gives each ``Transport`` a thread of its own that blocks in ``recv`` and dispatches
what arrives: 1,024 nodes cost 1,024 threads, each about 130 KiB and a wake-up a second
(docs/measured.md). ``ReactorTransport`` starts no thread. After the version banner (read in the
thread that connects, inside the fan-out window) its socket joins one selector; when the socket
is readable, one of ``WORKERS`` threads reads the waiting messages and dispatches them exactly as
paramiko's own loop does (``_dispatch``, the body of ``Transport.run``). A worker may wait for
the rest of a packet; a connection that leaves one waiting for longer than ``STALL_S`` is shut
down, so a stuck peer cannot hold the pool. Keepalives and rekeys, which paramiko's thread does
when its ``recv`` times out, are asked for by the selector thread once a second.

What paramiko's loop looks like is pinned by a test (tests/unit/remote/test_reactor.py compares
the syntax tree of ``Transport.run`` with the versions this was read against: 3.4.1 to 5.1.0).
"""

from __future__ import annotations

import os
import queue
import select
import selectors
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
    xffffffff,
)
from paramiko.message import Message
from paramiko.packet import NeedRekeyException
from paramiko.ssh_exception import MessageOrderError, SSHException

WORKERS = 4  # threads that read and dispatch messages, whatever the number of connections
BURST = 64  # messages one worker handles on a connection before giving the others a turn
STALL_S = 30.0  # a worker waiting this long for the rest of one connection's packet: shut it down
TEND_S = 1.0  # how often keepalives and pending rekeys are looked at (paramiko: each recv timeout)


class PacketReactor:
    """The selector thread and its worker pool; started on first use, shared by every connection."""

    def __init__(self, workers: int = WORKERS):
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._lock = threading.Lock()
        self._requests: list[tuple[str, ReactorTransport]] = []
        self._known: set[ReactorTransport] = set()
        self._busy: dict[ReactorTransport, float] = {}  # in a worker since (monotonic)
        self._work: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self.threads = [threading.Thread(target=self._loop, name="cvs-ssh-reactor", daemon=True)]
        self.threads += [threading.Thread(target=self._worker, name=f"cvs-ssh-packets-{k}", daemon=True)
                         for k in range(workers)]
        for thread in self.threads:
            thread.start()

    # -- asked from any thread --------------------------------------------------------------
    def adopt(self, transport: "ReactorTransport") -> None:
        """Start reading this connection's packets."""
        self._post("adopt", transport)

    def forget(self, transport: "ReactorTransport") -> None:
        """Stop reading them (before its socket closes: the descriptor's number can be reused)."""
        self._post("forget", transport)

    @property
    def connections(self) -> int:
        return len(self._known)

    def _post(self, what: str, transport: "ReactorTransport") -> None:
        with self._lock:
            self._requests.append((what, transport))
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass  # the pipe is full of wake-ups already: the loop will look

    # -- the threads ------------------------------------------------------------------------
    def _worker(self) -> None:
        while True:
            self._work.get()()

    def _loop(self) -> None:
        next_tend = time.monotonic() + TEND_S
        while True:
            for key, _ in self._selector.select(max(0.0, next_tend - time.monotonic())):
                if key.data is None:
                    self._take_requests()
                else:
                    self._hand_to_worker(key.data)
            now = time.monotonic()
            if now >= next_tend:
                next_tend = now + TEND_S
                self._tend(now)

    def _take_requests(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass
        with self._lock:
            requests, self._requests = self._requests, []
        for what, transport in requests:
            if what == "adopt":
                self._known.add(transport)
                if transport.has_buffered():  # the banner's read took the start of a packet too
                    self._hand_to_worker(transport, watched=False)
                else:
                    self._watch(transport)
            elif what == "rearm":
                if transport in self._known:
                    self._busy.pop(transport, None)
                    self._watch(transport)
            else:
                self._known.discard(transport)
                self._busy.pop(transport, None)
                try:
                    self._selector.unregister(transport.sock)
                except (KeyError, ValueError, OSError):
                    pass

    def _watch(self, transport: "ReactorTransport") -> None:
        if not transport.active:
            self._known.discard(transport)
            return
        try:
            self._selector.register(transport.sock, selectors.EVENT_READ, transport)
        except (KeyError, ValueError, OSError):
            pass  # already watched, or its socket closed meanwhile (its forget is on the way)

    def _hand_to_worker(self, transport: "ReactorTransport", watched: bool = True) -> None:
        if watched:
            try:
                self._selector.unregister(transport.sock)
            except (KeyError, ValueError, OSError):
                return
        self._busy[transport] = time.monotonic()
        self._work.put(lambda: self._serve(transport))

    def _serve(self, transport: "ReactorTransport") -> None:
        """In a worker: the connection's waiting messages, then back to the selector."""
        if transport.read_waiting(BURST):
            self._post("rearm", transport)
        else:
            self._post("forget", transport)

    def _tend(self, now: float) -> None:
        """Shut down connections stuck mid-packet; ask idle ones for keepalives and rekeys."""
        for transport, since in list(self._busy.items()):
            if now - since > STALL_S:
                del self._busy[transport]
                transport.shut_down_stalled(now - since)
        for transport in self._known:
            if transport not in self._busy and transport.wants_tending(now):
                self._work.put(transport.tend)


_reactor: PacketReactor | None = None
_reactor_lock = threading.Lock()


def reactor() -> PacketReactor:
    """The process's one reactor, started on first use."""
    global _reactor
    with _reactor_lock:
        if _reactor is None:
            _reactor = PacketReactor()
        return _reactor


class ReactorTransport(paramiko.Transport):
    """paramiko's Transport without a thread of its own: ``PacketReactor`` reads its packets.

    Its socket timeout (``_active_check_timeout``) only matters while a worker waits for the rest
    of a packet: once a second it checks for a close, as paramiko's thread does."""

    _active_check_timeout = 1.0

    def start(self) -> None:
        """What ``threading.Thread.start`` would run before paramiko's loop, done here in the
        caller's thread (the version banner waits on the node); the loop is the reactor's."""
        try:
            self.packetizer.write_all((self.local_version + "\r\n").encode())
            self._log(paramiko.common.DEBUG, f"reactor transport {hex(id(self) & xffffffff)}: "
                                             f"local version {self.local_version}")
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
        return True

    def has_buffered(self) -> bool:
        """Bytes the packetizer already read off the socket (the selector cannot see them)."""
        return bool(getattr(self.packetizer, "_Packetizer__remainder", b""))

    def wants_tending(self, now: float) -> bool:
        """A rekey was asked for, or a keepalive may be due: one cheap look from the selector."""
        if not self.active or self.in_kex:
            return False
        return self.packetizer.need_rekey() or (self._keepalive_s > 0 and now >= self._next_tend)

    def tend(self) -> None:
        """In a worker: what paramiko's thread does each time its ``recv`` times out. paramiko
        sends the keepalive only if nothing was sent for its interval; looking twice per interval
        keeps one at most half an interval late."""
        self._next_tend = time.monotonic() + self._keepalive_s / 2
        try:
            if self.packetizer.need_rekey() and not self.in_kex:
                self._send_kex_init()
            self.packetizer._check_keepalive()
        except (SSHException, EOFError, OSError) as exc:
            self._end(exc)

    _keepalive_s = 0.0
    _next_tend = 0.0

    def set_keepalive(self, interval: int) -> None:
        self._keepalive_s = float(interval)
        self._next_tend = time.monotonic() + self._keepalive_s / 2
        super().set_keepalive(interval)

    def shut_down_stalled(self, waited: float) -> None:
        """The peer sent part of a packet and then nothing for ``waited`` seconds."""
        self.saved_exception = SSHException(f"the node sent part of a packet and then nothing for {waited:.0f}s")
        self.packetizer.close()
        try:
            self.sock.shutdown(2)  # the waiting worker's recv returns at once
        except OSError:
            pass

    def close(self) -> None:
        if self.active:
            reactor().forget(self)
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
        reactor().forget(self)
        self.sock.close()


def _readable(sock) -> bool:
    """More bytes wait on the socket now (one poll, no wait; ``select.select`` stops at fd 1,024)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))
