"""A bundle's blob: per-node payloads that differ a little are pieces of the first one, rebuilt exactly."""

from __future__ import annotations

import random

from cvs_tasks.remote import slurm_pieces as sp

SCRIPT = (b"#!/bin/bash\n# wrapper: node 0 of 4\nset -u\ncvs_finish() { echo \"$1\" > /s/node0.exit.tmp && "
          b"mv -f /s/node0.exit.tmp /s/node0.exit; }\nexport LOG_DIR=/l/out-node0\n" + b"export X=1\n" * 40
          + b"MBS=4 NODE_RANK=0 bash /w/train.sh\n")


def rank(script: bytes, r: int) -> bytes:
    return script.replace(b"node0", b"node%d" % r).replace(b"NODE_RANK=0", b"NODE_RANK=%d" % r)


def test_the_first_payload_is_stored_whole_and_a_repeat_costs_nothing():
    blob = sp.Blob()
    assert blob.pieces(SCRIPT, "stdin") == [(0, len(SCRIPT))]
    assert blob.pieces(SCRIPT, "stdin") == [(0, len(SCRIPT))]
    assert bytes(blob.data) == SCRIPT


def test_a_payload_that_differs_in_its_rank_is_a_few_pieces_and_a_few_new_bytes():
    blob = sp.Blob()
    blob.pieces(SCRIPT, "stdin")
    third = rank(SCRIPT, 3)
    pieces = blob.pieces(third, "stdin")
    assert sp.rebuild(bytes(blob.data), pieces) == third
    assert len(pieces) <= 11 and len(blob.data) - len(SCRIPT) <= 20  # "node3", "3": stored once each
    assert len(sp.encode(pieces)) < len(third) // 5


def test_every_payload_is_rebuilt_byte_for_byte_whatever_its_edits():
    rng = random.Random(25)
    base = bytes(rng.getrandbits(8) for _ in range(3000)) + b"\n".join(b"line %d" % i for i in range(200))
    blob = sp.Blob()
    payloads = [base]
    for _ in range(60):
        data = bytearray(rng.choice(payloads))
        for _ in range(rng.randrange(0, 6)):
            at = rng.randrange(0, len(data) + 1)
            cut = rng.randrange(0, 40)
            data[at:at + cut] = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 40)))
        payloads.append(bytes(data))
    payloads += [b"", b"\n", b"no newline at the end", base + b"\n" * 3]
    placed = [(p, blob.pieces(p, "stdin")) for p in payloads]
    for data, pieces in placed:  # later payloads never move earlier ones' bytes
        assert sp.rebuild(bytes(blob.data), pieces) == data
        assert pieces and len(pieces) <= sp.MAX_PIECES


def test_a_payload_too_different_from_the_first_is_stored_whole():
    blob = sp.Blob()
    blob.pieces(b"echo one\n", "command")
    other = b"something else entirely, of another shape\n"
    assert blob.pieces(other, "command") == [(len(b"echo one\n"), len(other))]
    assert blob.pieces(b"", "command") == [(len(b"echo one\n") + len(other), 0)]


def test_kinds_keep_their_own_first_payload():
    blob = sp.Blob()
    put = b"umask 077 && mkdir -p /s && cat > /s/node0.sh.cvs-tmp.$$ && mv -f /s/node0.sh.cvs-tmp.$$ /s/node0.sh"
    blob.pieces(put, "command")
    blob.pieces(SCRIPT, "stdin")
    seventh = put.replace(b"node0", b"node7")
    pieces = blob.pieces(seventh, "command")
    assert sp.rebuild(bytes(blob.data), pieces) == seventh and pieces[0] == (0, put.index(b"node0"))
    assert blob.pieces(b"tiny", "command") == [(len(put) + len(SCRIPT) + len(b"node7"), 4)]  # whole is shorter
