"""Render the fixture runs and take real screenshots with headless Chromium."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from cvs_tasks.report.render import render_all

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="headless Chromium is not installed"),
]


def screenshot(html: Path, png: Path, profile: Path, size: str = "1280,2000") -> Path:
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", f"--screenshot={png}", f"--window-size={size}", html.as_uri(),
    ]
    subprocess.run(cmd, check=False, timeout=120, capture_output=True)
    assert png.is_file(), f"chromium wrote no screenshot: {' '.join(cmd)}"
    return png


def png_pixels(png: Path) -> tuple[int, int, set[bytes]]:
    """Width, height and the set of distinct pixel values of an 8-bit RGB/RGBA PNG (tiny decoder)."""
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    previous = bytearray(stride)
    colours: set[bytes] = set()
    for y in range(height):
        line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        row = _unfilter(line[0], bytearray(line[1:]), previous, channels)
        if y % 8 == 0:
            colours.update(bytes(row[x:x + 3]) for x in range(0, stride, channels * 4))
        previous = row
    return width, height, colours


def _unfilter(kind: int, row: bytearray, prev: bytearray, bpp: int) -> bytearray:
    for i in range(len(row)):
        left = row[i - bpp] if i >= bpp else 0
        up, up_left = prev[i], prev[i - bpp] if i >= bpp else 0
        if kind == 1:
            row[i] = (row[i] + left) & 0xFF
        elif kind == 2:
            row[i] = (row[i] + up) & 0xFF
        elif kind == 3:
            row[i] = (row[i] + (left + up) // 2) & 0xFF
        elif kind == 4:
            p = left + up - up_left
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
            row[i] = (row[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else up_left)) & 0xFF
    return row


@pytest.mark.timeout(300)
def test_report_screenshots_show_a_rendered_page(fixture_run, tmp_path):
    passing = render_all(fixture_run("passing_distributed"))["report"]
    failed = render_all(fixture_run("failed_nccl"))["report"]
    shot_pass = screenshot(passing, tmp_path / "pass.png", tmp_path / "profile-pass")
    shot_fail = screenshot(failed, tmp_path / "fail.png", tmp_path / "profile-fail")

    for shot in (shot_pass, shot_fail):
        assert shot.stat().st_size > 50_000  # a blank 1280x2000 page compresses to a few KB
        width, height, colours = png_pixels(shot)
        assert (width, height) == (1280, 2000)
        assert len(colours) > 50, "screenshot is (nearly) one colour"
    _, _, pass_colours = png_pixels(shot_pass)
    _, _, fail_colours = png_pixels(shot_fail)
    assert (0x2E, 0x7D, 0x32) in {tuple(c) for c in pass_colours}  # the green PASS badge
    assert (0xC6, 0x28, 0x28) in {tuple(c) for c in fail_colours}  # the red FAIL badge
    callout = (0xFF, 0xF5, 0xF5)  # the "What failed first" callout's background, under the verdict
    assert callout in {tuple(c) for c in fail_colours} and callout not in {tuple(c) for c in pass_colours}
    assert shot_pass.read_bytes() != shot_fail.read_bytes()
