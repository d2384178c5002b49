"""The bounded reader on its own: what is refused, how fast, and with which words."""

from __future__ import annotations

import os
import threading

import pytest

from cvs_tasks.inputs import LIMITS, InputRefused, load_json, open_regular, read_bytes, read_secret, read_text


def refused_within(seconds: float, fn, *args) -> InputRefused:
    """Call ``fn`` in a thread; it must raise InputRefused before ``seconds`` (no blocking read)."""
    box: dict = {}

    def call():
        try:
            fn(*args)
        except InputRefused as exc:
            box["exc"] = exc
        except BaseException as exc:  # noqa: BLE001 - reported below
            box["other"] = exc

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{fn.__name__} blocked"
    assert "other" not in box, box.get("other")
    return box["exc"]


@pytest.mark.parametrize("fn", [read_bytes, read_text, load_json])
def test_a_fifo_without_a_writer_is_refused_at_once(tmp_path, fn):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    exc = refused_within(5, fn, fifo, "config")
    assert "FIFO" in str(exc) and str(fifo) in str(exc) and exc.exit_code == 2


@pytest.mark.parametrize("path, words", [("/dev/zero", "a device"), ("/dev/null", "a device")])
def test_devices_are_refused_before_a_byte_is_read(path, words):
    assert words in str(refused_within(5, read_bytes, path, "secret"))


def test_a_directory_and_a_missing_file_are_named(tmp_path):
    assert "a directory" in str(refused_within(5, read_bytes, tmp_path, "cluster"))
    exc = refused_within(5, read_bytes, tmp_path / "nope.json", "cluster")
    assert "not found (tried" in str(exc) and "nope.json" in str(exc)


def test_the_size_limit_is_per_kind(tmp_path):
    path = tmp_path / "token"
    path.write_bytes(b"x" * (LIMITS["secret"].max_bytes + 1))
    assert "limit" in str(refused_within(5, read_secret, path))
    assert len(read_bytes(path, "config")) == LIMITS["secret"].max_bytes + 1  # a config may be larger


def test_non_utf8_names_byte_line_and_column(tmp_path):
    path = tmp_path / "c.json"
    path.write_bytes(b'{\n  "a": "caf\xe9"\n}')
    exc = refused_within(5, read_text, path, "config")
    assert "not UTF-8 text (byte 13, line 2 column 12" in str(exc)


def test_a_regular_file_opens_as_a_stream(tmp_path):
    path = tmp_path / "training.log"
    path.write_text("line 1\nline 2\n")
    with os.fdopen(open_regular(path, "config"), "rb") as fh:
        assert fh.read().splitlines() == [b"line 1", b"line 2"]
