"""The HTML report's inline SVG charts: the speedup interval of each scenario, the latency
distribution of each arm, and the block means round by round (with a legend).

No chart library and no browser at build time, so text is laid out by estimate: a label
is `text_width` wide (a conservative 0.62 em per character of 11 px system-ui) and every
label is placed so its box stays inside the SVG and clear of the others.  The tests parse
each chart and check exactly that.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

import numpy as np

from luminal.metering.report.view import ScenarioView, fmt_time

COLORS = {"baseline": "#7a869a", "luminal": "#1f6feb"}
FONT_PX = 11
WIDTH = 720


def text_width(text: str, px: float = FONT_PX) -> float:
    """A label's width, estimated on the wide side (digits and lowercase are ~0.55 em)."""
    return 0.62 * px * len(text)


def _text(x: float, y: float, text: str, anchor: str = "start", extra: str = "") -> str:
    return f"<text x='{x:.1f}' y='{y:.1f}' text-anchor='{anchor}'{extra}>{escape(text)}</text>"


def _inside(x: float, text: str, anchor: str, lo: float, hi: float) -> tuple[float, str]:
    """Move a label's anchor so its box stays within [lo, hi] (switching to `end` or
    `start` at the edges)."""
    w = text_width(text)
    left = {"start": x, "middle": x - w / 2, "end": x - w}[anchor]
    if left < lo:
        return lo, "start"
    if left + w > hi:
        return hi, "end"
    return x, anchor


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    return [lo + (hi - lo) * k / (n - 1) for k in range(n)]


def speedup_svg(scenarios: Sequence[ScenarioView]) -> str:
    """Each scenario's interval as a bar, its point as a dot, against the 1.0 line."""
    w, row, left, right, top = WIDTH, 34, 110, 30, 30
    h = top + row * len(scenarios) + 24
    lows = [min(s.speedup["lower"], 1.0) for s in scenarios]
    highs = [max(s.speedup["upper"], 1.0) for s in scenarios]
    lo, hi = min(lows), max(highs)
    pad = (hi - lo) * 0.15 or 0.1
    lo, hi = max(0.0, lo - pad), hi + pad

    def x(val: float) -> float:
        return left + (val - lo) / (hi - lo) * (w - left - right)

    out = [
        f"<svg width='{w}' height='{h}' role='img' aria-label='speedup with confidence interval'>",
        f"<line x1='{x(1):.1f}' y1='{top - 8}' x2='{x(1):.1f}' y2='{h - 22}' stroke='#cf222e' "
        "stroke-dasharray='4 3'/>",
    ]
    label = "1.0 (no change)"
    lx, anchor = _inside(x(1) + 4, label, "start", left, w - 2)
    out.append(_text(lx, 12, label, anchor, " fill='#cf222e'"))
    for t in _ticks(lo, hi):
        out.append(_text(x(t), h - 6, f"{t:.2f}x", "middle"))
    for i, s in enumerate(scenarios):
        y = top + 10 + i * row
        sp = s.speedup
        out += [
            _text(6, y + 4, s.name),
            f"<line x1='{x(sp['lower']):.1f}' y1='{y}' x2='{x(sp['upper']):.1f}' y2='{y}' "
            "stroke='#1f6feb' stroke-width='3'/>",
            *(
                f"<line x1='{x(b):.1f}' y1='{y - 7}' x2='{x(b):.1f}' y2='{y + 7}' "
                "stroke='#1f6feb' stroke-width='2'/>"
                for b in (sp["lower"], sp["upper"])
            ),
            f"<circle cx='{x(sp['point']):.1f}' cy='{y}' r='5' fill='#1f6feb'/>",
            _text(x(sp["point"]), y - 10, f"{sp['point']:.3f}x", "middle"),
            _text(x(sp["lower"]) - 5, y + 4, f"{sp['lower']:.3f}", "end"),
            _text(x(sp["upper"]) + 5, y + 4, f"{sp['upper']:.3f}"),
        ]
    out.append("</svg>")
    return "".join(out)


def distribution_svg(timings: Mapping[str, list[list[int]]], bins: int = 48) -> str:
    """One histogram per arm over a shared log-scaled time axis (latency tails are long),
    from the 0.5th to the 99.5th percentile of all runs; runs outside count in the end bins."""
    runs = {
        arm: np.concatenate([np.asarray(b, np.float64) for b in blocks])
        for arm, blocks in timings.items()
    }
    everything = np.concatenate(list(runs.values()))
    lo, hi = (float(q) for q in np.percentile(everything, [0.5, 99.5]))
    lo = max(lo, 1.0)
    if hi <= lo * 1.01:
        lo, hi = lo / 1.05, hi * 1.05
    edges = np.geomspace(lo, hi, bins + 1)
    w, panel, left, right = WIDTH, 110, 110, 30
    h = panel * len(runs) + 28
    span = np.log(hi / lo)

    def x(val: float) -> float:
        return left + float(np.log(max(val, lo) / lo) / span) * (w - left - right)

    out = [f"<svg width='{w}' height='{h}' role='img' aria-label='latency distribution per arm'>"]
    for i, (arm, xs) in enumerate(runs.items()):
        top = i * panel + 8
        counts, _ = np.histogram(np.clip(xs, lo, hi), edges)
        peak = max(int(counts.max()), 1)
        color = COLORS.get(arm, "#444")
        out.append(_text(6, top + 14, arm, extra=" font-weight='600'"))
        out.append(_text(6, top + 30, f"{xs.size} runs"))
        base = top + panel - 16
        for k, c in enumerate(counts):
            bh = (panel - 40) * c / peak
            bw = max(x(edges[k + 1]) - x(edges[k]) - 1, 1)
            out.append(
                f"<rect x='{x(edges[k]):.1f}' y='{base - bh:.1f}' width='{bw:.1f}' "
                f"height='{bh:.1f}' fill='{color}'/>"
            )
        out.append(f"<line x1='{left}' y1='{base}' x2='{w - right}' y2='{base}' stroke='#d0d7de'/>")
        for row, (q, dash) in enumerate(((50, "5 3"), (99, "2 2"))):
            val = float(np.percentile(xs, q))
            if lo <= val <= hi:
                label = f"p{q} {fmt_time(val)}"
                lx, anchor = _inside(x(val) + 3, label, "start", left, w - 2)
                if anchor == "end":  # beside the line, on its left
                    lx = x(val) - 3
                out.append(
                    f"<line x1='{x(val):.1f}' y1='{top + 2 + 12 * row}' x2='{x(val):.1f}' "
                    f"y2='{base}' stroke='#1f2328' stroke-dasharray='{dash}'/>"
                    + _text(lx, top + 10 + 12 * row, label, anchor)
                )
    for t in np.geomspace(lo, hi, 5):
        label = fmt_time(float(t))
        tx, anchor = _inside(x(float(t)), label, "middle", 0, w - 2)
        out.append(_text(tx, h - 6, label, anchor))
    out.append("</svg>")
    return "".join(out)


def blocks_svg(timings: Mapping[str, list[list[int]]]) -> str:
    """Each arm's block means per round, with a legend above the plot, time ticks on the
    left and round ticks below."""
    means = {arm: [sum(b) / len(b) for b in blocks] for arm, blocks in timings.items()}
    allv = [m for ms in means.values() for m in ms]
    n = max(len(ms) for ms in means.values())
    lo, hi = min(allv), max(allv)
    pad = (hi - lo) * 0.1 or hi * 0.05 or 1
    lo, hi = max(0.0, lo - pad), hi + pad
    w, h, left, right, top, bottom = WIDTH, 200, 110, 30, 30, 40

    def x(i: float) -> float:
        return left + i / max(n - 1, 1) * (w - left - right)

    def y(val: float) -> float:
        return top + (hi - val) / (hi - lo) * (h - top - bottom)

    out = [f"<svg width='{w}' height='{h}' role='img' aria-label='block means per round'>"]
    lx = left
    for arm in means:  # the legend: a swatch of each arm's line and its name
        color = COLORS.get(arm, "#444")
        out.append(
            f"<line x1='{lx}' y1='12' x2='{lx + 22}' y2='12' stroke='{color}' stroke-width='3'/>"
        )
        out.append(_text(lx + 28, 16, arm))
        lx += 28 + text_width(arm) + 24
    out.append(_text(w - right, 16, "mean run time per block", "end", " fill='#656d76'"))
    for t in _ticks(lo, hi, 4):
        out.append(
            f"<line x1='{left}' y1='{y(t):.1f}' x2='{w - right}' y2='{y(t):.1f}' stroke='#eaeef2'/>"
            + _text(left - 6, y(t) + 4, fmt_time(t), "end")
        )
    for arm, ms in means.items():
        pts = " ".join(f"{x(i):.1f},{y(m):.1f}" for i, m in enumerate(ms))
        color = COLORS.get(arm, "#444")
        out.append(f"<polyline points='{pts}' fill='none' stroke='{color}' stroke-width='1.5'/>")
    for r in _round_ticks(n):
        out.append(_text(x(r - 1), h - bottom + 14, str(r), "middle"))
    out.append(_text((left + w - right) / 2, h - 4, "round", "middle", " fill='#656d76'"))
    out.append("</svg>")
    return "".join(out)


def _round_ticks(n: int, most: int = 8) -> list[int]:
    """Round numbers 1..n to label: 1, then multiples of a 1-2-5 step giving at most `most`
    labels (so neighbours are at least a step's width of the plot apart)."""
    step, k = 1, 0
    while n / step > most:
        k += 1
        step = (1, 2, 5)[k % 3] * 10 ** (k // 3)
    return sorted({1, *range(step, n + 1, step)})
