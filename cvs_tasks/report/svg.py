"""Points in, SVG markup out: the report's charts and its trend sparklines, with no plotting library
and no JavaScript.

Inline SVG keeps report.html one self-contained file that opens on an air-gapped head node.
Everything here is pure; text is escaped here: a chart is text the caller marks safe, a sparkline
comes marked (``Markup``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Literal, Sequence

from markupsafe import Markup
from markupsafe import escape as markup_escape

Point = tuple[float, float]
Style = Literal["line", "dots", "dashed"]


@dataclass(frozen=True)
class Series:
    """One thing to draw: a polyline, a set of dots, or a dashed (trend) line."""

    label: str
    points: Sequence[Point]
    color: str
    style: Style = "line"


@dataclass(frozen=True)
class Frame:
    """Plot area geometry: the SVG canvas minus margins for ticks, labels and the legend."""

    width: int = 600
    height: int = 280
    left: int = 64
    right: int = 18
    top: int = 34
    bottom: int = 46

    @property
    def plot_w(self) -> int:
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> int:
        return self.height - self.top - self.bottom


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 x 10^k steps) covering [lo, hi] with about ``count`` ticks."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError("tick range must be finite")
    if hi < lo:
        lo, hi = hi, lo
    magnitude_of_values = max(abs(lo), abs(hi))
    if hi - lo <= max(magnitude_of_values * 1e-9, 1e-200):  # flat (or float-noise) range: widen it
        pad = magnitude_of_values * 0.05
        pad = pad if pad > 1e-200 else 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(1, count - 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.floor(lo / step + 1e-9)
    ticks: list[float] = []
    while len(ticks) < 50:
        value = float(f"{(first + len(ticks)) * step:.12g}")  # drop float noise like 0.30000000000000004
        ticks.append(value)
        if value >= hi - step * 1e-9:
            break
    return ticks


def least_squares(points: Sequence[Point]) -> tuple[float, float] | None:
    """(slope, intercept) of the least-squares line through the points; None if undefined."""
    if len(points) < 2:
        return None
    n = len(points)
    mean_x = sum(p[0] for p in points) / n
    mean_y = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mean_x) ** 2 for p in points)
    if sxx == 0:
        return None
    sxy = sum((p[0] - mean_x) * (p[1] - mean_y) for p in points)
    slope = sxy / sxx
    return slope, mean_y - slope * mean_x


def trend_series(points: Sequence[Point], label: str, color: str) -> Series | None:
    """The least-squares line across the x span of the points, as a dashed series."""
    fit = least_squares(points)
    if fit is None:
        return None
    slope, intercept = fit
    xs = [p[0] for p in points]
    ends = [(x, slope * x + intercept) for x in (min(xs), max(xs))]
    return Series(label, ends, color, "dashed")


def tick_label(value: float, step: float) -> str:
    """Tick text with just enough decimals for the tick step (1k/1M suffixes for large values)."""
    if abs(value) >= 1_000_000 and step >= 100_000:
        return f"{value / 1_000_000:g}M"
    if abs(value) >= 10_000 and step >= 1000:
        return f"{value / 1000:g}k"
    decimals = max(0, -math.floor(math.log10(step))) if step > 0 else 0
    if step * 10**decimals % 1 > 1e-9:  # steps like 2.5 need one more digit
        decimals += 1
    return f"{value:.{decimals}f}"


def line_chart(
    series: Sequence[Series],
    *,
    title: str,
    x_label: str,
    y_label: str,
    frame: Frame = Frame(),
) -> str:
    """An SVG chart with axes, ticks, labels and a legend; "" when no series has a finite point.

    ``title`` is the accessible name (``<title>``); the page shows its own visible caption.
    """
    clean = [
        Series(s.label, [(float(x), float(y)) for x, y in s.points if _finite(x) and _finite(y)], s.color, s.style)
        for s in series
    ]
    drawn = [s for s in clean if s.points]
    if not drawn:
        return ""
    xs = [p[0] for s in drawn for p in s.points]
    ys = [p[1] for s in drawn for p in s.points]
    x_ticks = nice_ticks(min(xs), max(xs), 6)
    y_ticks = nice_ticks(min(ys), max(ys), 5)
    x0, x1, y0, y1 = x_ticks[0], x_ticks[-1], y_ticks[0], y_ticks[-1]

    def sx(x: float) -> float:
        return frame.left + (x - x0) / (x1 - x0) * frame.plot_w

    def sy(y: float) -> float:
        return frame.top + frame.plot_h - (y - y0) / (y1 - y0) * frame.plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {frame.width} {frame.height}" '
        f'role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
    ]
    parts += _grid_and_ticks(frame, x_ticks, y_ticks, sx, sy)
    parts.append(
        f'<rect class="chart-frame" x="{frame.left}" y="{frame.top}" width="{frame.plot_w}" '
        f'height="{frame.plot_h}" fill="none"/>'
    )
    parts.append(
        f'<text class="axis-label" x="{frame.left + frame.plot_w / 2:.1f}" y="{frame.height - 8}" '
        f'text-anchor="middle">{escape(x_label)}</text>'
    )
    mid_y = frame.top + frame.plot_h / 2
    parts.append(
        f'<text class="axis-label" x="14" y="{mid_y:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {mid_y:.1f})">{escape(y_label)}</text>'
    )
    for s in drawn:
        parts.append(_draw(s, sx, sy))
    parts += _legend(frame, drawn)
    parts.append("</svg>")
    return "\n".join(parts)


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _grid_and_ticks(frame: Frame, x_ticks: list[float], y_ticks: list[float], sx, sy) -> list[str]:
    out = []
    x_step = x_ticks[1] - x_ticks[0] if len(x_ticks) > 1 else 1.0
    y_step = y_ticks[1] - y_ticks[0] if len(y_ticks) > 1 else 1.0
    bottom = frame.top + frame.plot_h
    for t in y_ticks:
        y = sy(t)
        out.append(f'<line class="grid" x1="{frame.left}" y1="{y:.1f}" x2="{frame.left + frame.plot_w}" y2="{y:.1f}"/>')
        out.append(
            f'<text class="tick" x="{frame.left - 6}" y="{y + 4:.1f}" text-anchor="end">{tick_label(t, y_step)}</text>'
        )
    for t in x_ticks:
        x = sx(t)
        out.append(f'<line class="tick-mark" x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 5}"/>')
        out.append(
            f'<text class="tick" x="{x:.1f}" y="{bottom + 18}" text-anchor="middle">{tick_label(t, x_step)}</text>'
        )
    return out


def _draw(series: Series, sx, sy) -> str:
    color = escape(series.color)
    if series.style == "dots":
        dots = "".join(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3.2"/>' for x, y in series.points)
        return f'<g class="dots" fill="{color}" stroke="#fff" stroke-width="0.8">{dots}</g>'
    coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in series.points)
    dash = ' stroke-dasharray="6 4"' if series.style == "dashed" else ""
    width = "1.8" if series.style == "dashed" else "1.4"
    return (
        f'<polyline fill="none" stroke="{color}" stroke-width="{width}" stroke-linejoin="round"'
        f'{dash} points="{coords}"/>'
    )


def _legend(frame: Frame, drawn: Sequence[Series]) -> list[str]:
    """Legend entries right-aligned above the plot area, one after another."""
    out = []
    x = frame.left + frame.plot_w
    for s in reversed(drawn):
        text_w = 6.2 * len(s.label)
        x -= text_w
        out.append(f'<text class="legend" x="{x:.1f}" y="22">{escape(s.label)}</text>')
        x -= 22
        color = escape(s.color)
        if s.style == "dots":
            out.append(f'<circle cx="{x + 9:.1f}" cy="18" r="3.2" fill="{color}"/>')
        else:
            dash = ' stroke-dasharray="4 3"' if s.style == "dashed" else ""
            out.append(f'<line x1="{x:.1f}" y1="18" x2="{x + 17:.1f}" y2="18" stroke="{color}" '
                       f'stroke-width="2"{dash}/>')
        x -= 14
    return out


# -- trend sparklines ------------------------------------------------------------------------------
# One metric over the last runs, FAIL runs marked, the newest ringed: a line in the metric table,
# not a chart (no axes, no legend).
SPARK_WIDTH, SPARK_HEIGHT, SPARK_PAD = 120, 26, 3
SPARK_LINE = "#546e7a"
SPARK_FAIL = "#c62828"
SPARK_LAST = "#1565c0"


def sparkline(points: Sequence[tuple[str, float, str]], unit: str = "") -> Markup:
    """``points``: (run id, value, run verdict), oldest first. Empty markup for fewer than one point."""
    values = [float(v) for _, v, _ in points]
    if not values:
        return Markup("")
    lo, hi = min(values), max(values)
    span = (hi - lo) or abs(hi) or 1.0
    n = len(values)

    def x(i: int) -> float:
        return SPARK_PAD + (SPARK_WIDTH - 2 * SPARK_PAD) * (i / (n - 1) if n > 1 else 0.5)

    def y(v: float) -> float:
        return SPARK_HEIGHT - SPARK_PAD - (SPARK_HEIGHT - 2 * SPARK_PAD) * ((v - lo) / span if hi != lo else 0.5)

    coords = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
    parts = [f'<svg class="spark" xmlns="http://www.w3.org/2000/svg" width="{SPARK_WIDTH}" height="{SPARK_HEIGHT}" '
             f'viewBox="0 0 {SPARK_WIDTH} {SPARK_HEIGHT}" role="img">',
             f"<title>{markup_escape(_spark_title(points, unit))}</title>",
             f'<polyline fill="none" stroke="{SPARK_LINE}" stroke-width="1.2" points="{coords}"/>']
    for i, (_, v, verdict) in enumerate(points):
        if verdict == "FAIL":
            parts.append(f'<circle cx="{x(i):.1f}" cy="{y(float(v)):.1f}" r="2" fill="{SPARK_FAIL}"/>')
    parts.append(f'<circle cx="{x(n - 1):.1f}" cy="{y(values[-1]):.1f}" r="2.6" fill="none" stroke="{SPARK_LAST}" '
                 'stroke-width="1.2"/>')
    parts.append("</svg>")
    return Markup("".join(parts))


def _spark_title(points: Sequence[tuple[str, float, str]], unit: str) -> str:
    vals = ", ".join(f"{v:.4g}" for _, v, _ in points)
    return f"last {len(points)} runs ({unit}): {vals}; newest {points[-1][0]}" if unit else \
        f"last {len(points)} runs: {vals}; newest {points[-1][0]}"
