"""``line_heads``: every line's head and number, read a chunk at a time, whatever a line's length."""

from __future__ import annotations

import random

import pytest

from cvs_tasks.inputs import InputRefused
from cvs_tasks.metrics.parser import line_heads


def _expected(data: bytes, keep: int, first: int) -> list[tuple[int, bytes]]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # a final line end ends the last line; it starts none
    return [(n, line[:keep]) for n, line in enumerate(lines, start=1) if n >= first]


@pytest.mark.parametrize("seed", range(40))
def test_heads_match_a_plain_split_for_any_chunking(tmp_path, seed):
    rng = random.Random(seed)
    parts = [rng.choice([b"", b"a", b"xyz" * rng.randint(0, 40), b"\r"]) + b"\n" * rng.randint(0, 3)
             for _ in range(rng.randint(0, 60))]
    data = b"".join(parts) + rng.choice([b"", b"tail without a line end"])
    path = tmp_path / "log"
    path.write_bytes(data)
    keep, first, chunk = rng.randint(0, 12), rng.randint(1, 30), rng.randint(1, 17)
    assert list(line_heads(path, keep, first, chunk_bytes=chunk)) == _expected(data, keep, first)


def test_a_long_line_is_cut_to_its_head_and_numbering_goes_on(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"one\n" + b"x" * 5_000_000 + b"\nthree\n")
    assert list(line_heads(path, 8, chunk_bytes=4096)) == [(1, b"one"), (2, b"x" * 8), (3, b"three")]
    assert list(line_heads(path, 8, first=3, chunk_bytes=4096)) == [(3, b"three")]


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(InputRefused, match="directory"):
        list(line_heads(tmp_path, 8))
