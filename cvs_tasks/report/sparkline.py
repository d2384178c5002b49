"""A trend sparkline as inline SVG: one metric over the last runs, FAIL runs marked, the newest ringed."""

from __future__ import annotations

from typing import Sequence

from markupsafe import Markup, escape

WIDTH, HEIGHT, PAD = 120, 26, 3
LINE = "#546e7a"
FAIL = "#c62828"
LAST = "#1565c0"


def sparkline(points: Sequence[tuple[str, float, str]], unit: str = "") -> Markup:
    """``points``: (run id, value, run verdict), oldest first. Empty markup for fewer than one point."""
    values = [float(v) for _, v, _ in points]
    if not values:
        return Markup("")
    lo, hi = min(values), max(values)
    span = (hi - lo) or abs(hi) or 1.0
    n = len(values)

    def x(i: int) -> float:
        return PAD + (WIDTH - 2 * PAD) * (i / (n - 1) if n > 1 else 0.5)

    def y(v: float) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * ((v - lo) / span if hi != lo else 0.5)

    coords = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
    parts = [f'<svg class="spark" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img">',
             f"<title>{escape(_title(points, unit))}</title>",
             f'<polyline fill="none" stroke="{LINE}" stroke-width="1.2" points="{coords}"/>']
    for i, (_, v, verdict) in enumerate(points):
        if verdict == "FAIL":
            parts.append(f'<circle cx="{x(i):.1f}" cy="{y(float(v)):.1f}" r="2" fill="{FAIL}"/>')
    parts.append(f'<circle cx="{x(n - 1):.1f}" cy="{y(values[-1]):.1f}" r="2.6" fill="none" stroke="{LAST}" '
                 'stroke-width="1.2"/>')
    parts.append("</svg>")
    return Markup("".join(parts))


def _title(points: Sequence[tuple[str, float, str]], unit: str) -> str:
    vals = ", ".join(f"{v:.4g}" for _, v, _ in points)
    return f"last {len(points)} runs ({unit}): {vals}; newest {points[-1][0]}" if unit else \
        f"last {len(points)} runs: {vals}; newest {points[-1][0]}"
