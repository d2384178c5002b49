"""A broadcast bundle's blob: each node's payload as pieces of bytes stored once (pure).

srun hands a broadcast's bundle to every node, so every byte in it reaches every node. A payload
shared by all nodes is stored once; but per-node payloads that are all different (each node's job
script, each node's ``put`` command naming its own path) used to be stored whole, one per node, so
each node received every node's payload: N scripts of a few KiB to each node, N² bytes in total.
They differ in a few characters (the rank in a path, ``NODE_RANK=3``). Here the first payload of a
kind is stored whole as the *base*; a later one of that kind becomes a list of pieces: runs of the
base it shares, and the few bytes it changes (each distinct run stored once). A node rebuilds its
own payload byte for byte by concatenating its pieces (``remote/slurm_broadcast.py``), so what a
node runs is exactly what it was given; the bundle grows by a short row per node, not a script.

The diff is by line, then by word inside a changed line (``difflib``; word for word where a line
keeps its number of words, as when only a rank changes), so ``out-node3`` costs one word, found
without a scan per character. A payload whose pieces would not be shorter than the
payload itself, or too many to fetch quickly, is stored whole.
"""

from __future__ import annotations

import difflib
import itertools
import re
from typing import Sequence

Piece = tuple[int, int]  # (offset in the blob, length)
Part = tuple[int, int] | tuple[bytes, None]  # a run (start, end) of the base, or bytes of its own
MAX_PIECES = 48  # a node fetches each piece with one tail|head: keep that a few dozen at most
_WORD = re.compile(rb"\w+|\W")


class Blob:
    """The bytes a bundle carries after its table; ``pieces`` places a payload and says where it lies."""

    def __init__(self) -> None:
        self.data = bytearray()
        self._at: dict[bytes, int] = {}
        self._bases: dict[str, tuple[bytes, int]] = {}

    def place(self, data: bytes) -> int:
        """Where ``data`` lies whole in the blob (stored on first use)."""
        if data not in self._at:
            self._at[data] = len(self.data)
            self.data.extend(data)
        return self._at[data]

    def pieces(self, data: bytes, kind: str) -> list[Piece]:
        """``data`` as pieces: stored whole when it is the first of ``kind`` or one already
        stored, else as the runs it shares with that first payload and the bytes it changes."""
        if data in self._at or kind not in self._bases:
            at = self.place(data)
            self._bases.setdefault(kind, (data, at))
            return [(at, len(data))]
        base, base_at = self._bases[kind]
        parts = _joined(_delta(base, data))
        width = len(str(len(self.data) + len(data))) * 2 + 2  # "off:len," at the most
        new_bytes = sum(len(p) for p, _ in parts if not isinstance(p, int) and p not in self._at)
        if not parts or len(parts) > MAX_PIECES or len(parts) * width + new_bytes >= len(data) + width:
            return [(self.place(data), len(data))]
        return _merged([(base_at + start, end - start) if isinstance(start, int) else (self.place(start), len(start))
                        for start, end in parts])


def encode(pieces: list[Piece]) -> str:
    """A payload's pieces as its row in the bundle's table: ``off:len,off:len``."""
    return ",".join(f"{at}:{length}" for at, length in pieces)


def rebuild(blob: bytes, pieces: list[Piece]) -> bytes:
    """The payload the pieces describe (what the node program does with tail and head)."""
    return b"".join(blob[at:at + length] for at, length in pieces)


def _delta(base: bytes, data: bytes) -> list[Part]:
    """``data`` as runs ``(start, end)`` of ``base`` and literal bytes ``(bytes, None)``, in order."""
    old, new = base.splitlines(keepends=True), data.splitlines(keepends=True)
    starts = _offsets(old)
    parts: list[Part] = []
    for tag, i1, i2, j1, j2 in _opcodes(old, new):
        if tag == "equal":
            parts.append((starts[i1], starts[i2]))
        elif tag == "replace" and i2 - i1 == j2 - j1:
            for k in range(i2 - i1):
                parts += _line_delta(old[i1 + k], new[j1 + k], starts[i1 + k])
        elif j2 > j1:
            parts.append((b"".join(new[j1:j2]), None))
    return parts


def _line_delta(old: bytes, new: bytes, at: int) -> list[Part]:
    """One changed line, word by word: the words it keeps as runs of ``old`` (which starts at ``at``).
    Words both lines start or end with are set aside first: the matcher then sees only the middle."""
    old_words, new_words = _WORD.findall(old), _WORD.findall(new)
    head = 0
    while head < min(len(old_words), len(new_words)) and old_words[head] == new_words[head]:
        head += 1
    tail = 0
    while (tail < min(len(old_words), len(new_words)) - head
           and old_words[-1 - tail] == new_words[-1 - tail]):
        tail += 1
    old_at, new_at = _offsets(old_words), _offsets(new_words)
    parts: list[Part] = [(at, at + old_at[head])]
    for tag, i1, i2, j1, j2 in _opcodes(old_words[head:len(old_words) - tail], new_words[head:len(new_words) - tail]):
        if tag == "equal":
            parts.append((at + old_at[head + i1], at + old_at[head + i2]))
        elif j2 > j1:
            parts.append((new[new_at[head + j1]:new_at[head + j2]], None))
    parts.append((at + old_at[len(old_words) - tail], at + len(old)))
    return parts


def _opcodes(old: Sequence[bytes], new: Sequence[bytes]) -> list[tuple[str, int, int, int, int]]:
    """difflib's opcodes; as many lines or words on both sides (a rank for a rank) are compared in place."""
    if len(old) != len(new):
        return difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    codes: list[tuple[str, int, int, int, int]] = []
    for k, (a, b) in enumerate(zip(old, new)):
        tag = "equal" if a == b else "replace"
        if codes and codes[-1][0] == tag == "equal":
            codes[-1] = (tag, codes[-1][1], k + 1, codes[-1][3], k + 1)
        else:
            codes.append((tag, k, k + 1, k, k + 1))
    return codes


def _joined(parts: list[Part]) -> list[Part]:
    """Runs of the base that continue each other become one run, literals side by side one literal."""
    out: list[Part] = []
    for start, end in parts:
        if out and isinstance(start, int) and isinstance(out[-1][0], int) and out[-1][1] == start:
            out[-1] = (out[-1][0], end)
        elif out and not isinstance(start, int) and not isinstance(out[-1][0], int):
            out[-1] = (out[-1][0] + start, None)
        else:
            out.append((start, end))
    return out


def _offsets(chunks: list[bytes]) -> list[int]:
    """Where each chunk starts when they are joined, plus the end."""
    return [0, *itertools.accumulate(map(len, chunks))]


def _merged(pieces: list[Piece]) -> list[Piece]:
    """Adjacent pieces that continue each other in the blob become one; empty ones go."""
    out: list[Piece] = []
    for at, length in pieces:
        if length == 0:
            continue
        if out and out[-1][0] + out[-1][1] == at:
            out[-1] = (out[-1][0], out[-1][1] + length)
        else:
            out.append((at, length))
    return out
