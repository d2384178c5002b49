"""put/read command text and the read protocol's parsing (pure)."""

from __future__ import annotations

import pytest

from cvs_tasks.remote.shellcmd import incomplete_utf8_tail, parse_read_output, put_command, read_command


def test_put_command_writes_a_private_temp_file_then_renames():
    assert put_command("/run/cvs/hf token", 0o640) == (
        "umask 077 && mkdir -p /run/cvs && cat > '/run/cvs/hf token.cvs-tmp'.$$ && "
        "chmod 640 '/run/cvs/hf token.cvs-tmp'.$$ && "
        "mv -f '/run/cvs/hf token.cvs-tmp'.$$ '/run/cvs/hf token' "
        "|| { rm -f '/run/cvs/hf token.cvs-tmp'.$$; exit 1; }")


def test_read_command_text():
    assert read_command("/l/train.log", 10, 65536, "/l/exit code") == (
        "f=/l/train.log; "
        'if [ -f "$f" ]; then n=$(wc -c < "$f") || exit 1; n=$((n)); else n=-; fi; '
        "s='/l/exit code'; "
        "if [ -f \"$s\" ]; then h=$(head -c 4096 \"$s\" | od -An -v -tx1 | tr -d ' \\n'); else h=-; fi; "
        "printf 'CVSREAD %s %s\\n' \"$n\" \"$h\"; "
        'if [ "$n" != - ]; then tail -c +11 "$f" | head -c 65536; fi')
    assert "h=-;" in read_command("/l/x", 0, 16)


@pytest.mark.parametrize("offset,max_bytes", [(-1, 10), (0, 3)])
def test_read_command_rejects_bad_arguments(offset, max_bytes):
    with pytest.raises(ValueError):
        read_command("/x", offset, max_bytes)


@pytest.mark.parametrize("data,held", [
    (b"", 0), (b"abc", 0), ("é".encode(), 0), ("é".encode()[:1], 1),
    ("€".encode()[:2], 2), ("€".encode()[:1], 1), ("😀".encode()[:3], 3),
    (b"ok" + "😀".encode(), 0), (b"\xff", 0), (b"\x80\x80\x80\x80", 0),
])
def test_incomplete_utf8_tail(data, held):
    assert incomplete_utf8_tail(data) == held


def test_parse_keeps_a_cut_character_for_the_next_read():
    parsed = parse_read_output(b"CVSREAD 100 3137\nloss \xe2\x82")
    assert (parsed.data, parsed.consumed, parsed.size, parsed.sidecar) == ("loss ", 5, 100, "17")


def test_parse_missing_file_and_missing_sidecar():
    parsed = parse_read_output(b"CVSREAD - -\n")
    assert (parsed.data, parsed.consumed, parsed.size, parsed.sidecar) == ("", 0, None, None)
    assert parse_read_output(b"CVSREAD 0 \n").sidecar == ""  # empty sidecar file


@pytest.mark.parametrize("bad", [b"", b"hello\n", b"CVSREAD x -\n", b"CVSREAD 1 zz\n", b"CVSREAD 1"])
def test_parse_rejects_garbage(bad):
    with pytest.raises(ValueError):
        parse_read_output(bad)
