"""``ReactorTransport`` against OpenSSH's sshd: key exchanges in the middle of a transfer.

The exchanges run in the reactor's workers while data keeps arriving, as they do when a long
follower passes paramiko's rekey limit (512 MiB). Stock paramiko (its thread per connection)
hangs here in 5 runs of 6 on this machine: the node's channel close arrives after this end asked
for new keys, and paramiko's reader waits to answer it for the exchange only that reader can
finish (``ReactorTransport._send_user_message``).
"""

from __future__ import annotations

import socket

import paramiko

from cvs_tasks.remote.reactor import ReactorTransport

WAIT_S = 30.0
MIB = 1024 * 1024


def _connect(sshd) -> ReactorTransport:
    transport = ReactorTransport(socket.create_connection((sshd.address, sshd.port), timeout=WAIT_S))
    transport.start_client(timeout=WAIT_S)
    transport.auth_publickey("root", paramiko.PKey.from_path(sshd.client_key))
    return transport


def _run(transport: ReactorTransport, command: str) -> tuple[bytes, int]:
    channel = transport.open_session(timeout=WAIT_S)
    channel.settimeout(WAIT_S)
    channel.exec_command(command)
    out = bytearray()
    while chunk := channel.recv(1 << 16):
        out += chunk
    return bytes(out), channel.recv_exit_status()


def test_new_keys_asked_for_again_and_again_while_data_arrives(sshd, monkeypatch):
    transport = _connect(sshd)
    try:
        exchanges = []
        real = transport._send_kex_init
        monkeypatch.setattr(transport, "_send_kex_init", lambda: (exchanges.append(1), real())[1])
        transport.packetizer.REKEY_BYTES = MIB // 4  # this end asks for new keys every 256 KiB received
        out, code = _run(transport, "head -c 4194304 /dev/zero | tr '\\0' x; exit 7")
        assert (len(out), set(out), code) == (4 * MIB, {ord("x")}, 7)
        # at least one exchange ran mid-transfer; how many depends on timing: paramiko stops asking
        # once the limit is passed again during an exchange (its in_kex stays set), threads or not
        assert len(exchanges) >= 1
        assert _run(transport, "echo again") == (b"again\n", 0)
        assert transport.is_active() and not transport.in_kex
    finally:
        transport.close()
