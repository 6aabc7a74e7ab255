"""Small inline-SVG charts for the evaluation report (no plotting library, no scripts).

Each function returns one ``<svg>`` element as a string, sized by ``viewBox`` so it scales with
its container. Every text that comes from data is escaped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Sequence

__all__ = ["Series", "grouped_bars", "line_chart", "diff_bars", "mode_colors"]

PALETTE = ("#3b6fb6", "#e08a2b", "#3a9a5b", "#8e5ab8", "#c94f4f", "#3aa0a8", "#a07845")
NAMED = {"lexical": PALETTE[0], "dense": PALETTE[1], "hybrid": PALETTE[2], "auto": PALETTE[3]}
AXIS, GRID, INK, MUTED = "#9aa3ad", "#e6e9ed", "#1f2933", "#66707a"
WIN, LOSS = "#3a9a5b", "#c94f4f"


@dataclass(frozen=True)
class Series:
    """One named, coloured series of values."""

    name: str
    color: str
    values: tuple[float, ...]


def mode_colors(modes: Sequence[str]) -> dict[str, str]:
    """A stable colour per mode: the usual modes keep theirs, others take the next free one."""
    taken = {NAMED[m] for m in modes if m in NAMED}
    free = iter([c for c in PALETTE if c not in taken])
    out: dict[str, str] = {}
    for i, m in enumerate(modes):
        out[m] = NAMED.get(m) or next(free, PALETTE[i % len(PALETTE)])
    return out


def _svg(width: int, height: int, body: list[str], label: str) -> str:
    return (
        f'<svg viewBox="0 0 {width} {height}" width="100%" role="img" aria-label="{escape(label)}" '
        f'font-family="inherit" font-size="12">' + "".join(body) + "</svg>"
    )


def _text(
    x: float, y: float, s: str, anchor: str = "middle", color: str = MUTED, size: int = 12, weight: str = "normal"
) -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="{color}" font-size="{size}" '
        f'font-weight="{weight}">{escape(s)}</text>'
    )


def _line(x1: float, y1: float, x2: float, y2: float, color: str = GRID, width: float = 1) -> str:
    return f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{color}" stroke-width="{width}"/>'


def _y_grid(
    left: float, right: float, top: float, bottom: float, ticks: Sequence[float], lo: float, hi: float
) -> list[str]:
    """Horizontal grid lines with their labels on the left, for values in ``[lo, hi]``."""
    out = []
    for t in ticks:
        y = bottom - (t - lo) / (hi - lo) * (bottom - top)
        out.append(_line(left, y, right, y, AXIS if t == 0 else GRID))
        out.append(_text(left - 6, y + 4, f"{t:g}", anchor="end"))
    return out


def _legend(series: Sequence[Series], x: float, y: float) -> list[str]:
    out = []
    for s in series:
        out.append(f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="12" height="12" rx="2" fill="{s.color}"/>')
        out.append(_text(x + 17, y + 1, s.name, anchor="start", color=INK))
        x += 30 + 7.5 * len(s.name)
    return out


def grouped_bars(
    groups: Sequence[str], series: Sequence[Series], width: int = 560, height: int = 300, label: str = "bar chart"
) -> str:
    """Bars for each group (e.g. metrics), one per series (e.g. modes), on a 0–1 axis."""
    left, right, top, bottom = 40, width - 10, 34, height - 30
    body = _legend(series, left, 16)
    body += _y_grid(left, right, top, bottom, [0, 0.2, 0.4, 0.6, 0.8, 1.0], 0.0, 1.0)
    slot = (right - left) / max(len(groups), 1)
    bar = min(44.0, slot * 0.8 / max(len(series), 1))
    for gi, group in enumerate(groups):
        x0 = left + gi * slot + (slot - bar * len(series)) / 2
        for si, s in enumerate(series):
            v = max(0.0, min(1.0, s.values[gi]))
            h = v * (bottom - top)
            x = x0 + si * bar
            body.append(
                f'<rect x="{x + 1:.1f}" y="{bottom - h:.1f}" width="{bar - 2:.1f}" height="{h:.1f}" '
                f'rx="2" fill="{s.color}"><title>{escape(s.name)} {escape(group)}: {v:.3f}</title></rect>'
            )
            body.append(_text(x + bar / 2, bottom - h - 4, f"{v:.3f}", size=10, color=INK))
        body.append(_text(left + (gi + 0.5) * slot, bottom + 18, group, color=INK, weight="600"))
    return _svg(width, height, body, label)


def line_chart(
    xs: Sequence[int], series: Sequence[Series], width: int = 560, height: int = 300, label: str = "line chart"
) -> str:
    """Lines over a logarithmic x axis (cut-offs such as 1…100) and a 0–1 y axis."""
    left, right, top, bottom = 40, width - 16, 34, height - 30
    body = _legend(series, left, 16)
    body += _y_grid(left, right, top, bottom, [0, 0.2, 0.4, 0.6, 0.8, 1.0], 0.0, 1.0)
    lo, hi = math.log(min(xs)), math.log(max(xs)) if max(xs) > min(xs) else math.log(min(xs)) + 1

    def px(x: float) -> float:
        return left + (math.log(x) - lo) / (hi - lo) * (right - left)

    def py(v: float) -> float:
        return bottom - max(0.0, min(1.0, v)) * (bottom - top)

    for x in xs:
        body.append(_line(px(x), top, px(x), bottom, GRID))
        body.append(_text(px(x), bottom + 18, str(x), color=INK))
    for s in series:
        pts = " ".join(f"{px(x):.1f},{py(v):.1f}" for x, v in zip(xs, s.values))
        body.append(
            f'<polyline points="{pts}" fill="none" stroke="{s.color}" stroke-width="2.5" stroke-linejoin="round"/>'
        )
        for x, v in zip(xs, s.values):
            body.append(
                f'<circle cx="{px(x):.1f}" cy="{py(v):.1f}" r="3.5" fill="#fff" stroke="{s.color}" '
                f'stroke-width="2"><title>{escape(s.name)} recall@{x}: {v:.3f}</title></circle>'
            )
    return _svg(width, height, body, label)


def diff_bars(
    items: Sequence[tuple[str, float]], width: int = 1120, height: int = 260, label: str = "per-query differences"
) -> str:
    """Per-item differences sorted best first: green above zero, red below, grey ties."""
    left, right, top, bottom = 44, width - 10, 14, height - 26
    items = sorted(items, key=lambda kv: (-kv[1], kv[0]))
    peak = max([abs(v) for _, v in items] + [0.25])
    peak = math.ceil(peak * 4) / 4  # round the axis up to a multiple of 0.25
    ticks = [t for t in (-1, -0.75, -0.5, -0.25, 0, 0.25, 0.5, 0.75, 1) if -peak <= t <= peak]
    body = _y_grid(left, right, top, bottom, ticks, -peak, peak)
    mid = (top + bottom) / 2
    step = (right - left) / max(len(items), 1)
    for i, (name, v) in enumerate(items):
        h = abs(v) / peak * (bottom - top) / 2
        color = WIN if v > 0 else LOSS if v < 0 else AXIS
        y = mid - h if v > 0 else mid
        body.append(
            f'<rect x="{left + i * step:.2f}" y="{y:.2f}" width="{max(step - 0.6, 0.8):.2f}" '
            f'height="{max(h, 0.8):.2f}" fill="{color}"><title>{escape(name)}: {v:+.3f}</title></rect>'
        )
    body.append(_text(left, height - 6, "queries, sorted by difference →", anchor="start"))
    return _svg(width, height, body, label)
