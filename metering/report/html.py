"""A report as one self-contained HTML page: inline CSS and inline SVG, no scripts, no
external files.  Per scenario: the latency distribution of each arm (histogram of every
timed run, p50 and p99 marked) and the block means round by round; the speedup of every
scenario with its confidence interval against the 1.0 line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

import numpy as np

from luminal.metering.report.view import STAT_COLUMNS, ScenarioView, fmt_speedup, fmt_time, view

COLORS = {"baseline": "#7a869a", "luminal": "#1f6feb"}
CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;
max-width:1040px;color:#1f2328;padding:0 1rem}
h1{font-size:1.6rem;margin:.2rem 0}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #d0d7de}
table{border-collapse:collapse;margin:.5rem 0;font-variant-numeric:tabular-nums}
td,th{border:1px solid #d0d7de;padding:.25rem .55rem;text-align:left}th{background:#f6f8fa}
.badge{display:inline-block;padding:.15rem .6rem;border-radius:1rem;color:#fff;font-weight:600}
.VALID{background:#1a7f37}.INVALID{background:#cf222e}.ok{color:#1a7f37}.fail{color:#cf222e}
.big{font-size:1.35rem;font-weight:600}.muted{color:#656d76}code{font-size:.85em}
svg{display:block;margin:.5rem 0}svg text{font:11px system-ui,sans-serif;fill:#1f2328}
"""


def render(statement: Mapping[str, Any]) -> str:
    v = view(statement)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(v.title)}: {v.verdict}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{escape(v.title)} <span class='badge {v.verdict}'>{v.verdict}</span></h1>",
        f"<p class='muted'>Baseline: {escape(v.baseline)}<br>Candidate: {escape(v.candidate)}</p>",
        f"<p class='big'>Speedup ({escape(v.headline['scenario']) if v.headline else '-'}): "
        f"{escape(fmt_speedup(v.headline))}</p>",
        f"<p>{escape(v.savings_line)}</p>",
    ]
    if v.reasons:
        parts.append("<p class='fail'><b>Why INVALID:</b></p><ul>")
        parts += [f"<li class='fail'>{escape(r)}</li>" for r in v.reasons]
        parts.append("</ul>")
    if v.scenarios:
        parts.append(speedup_svg(v.scenarios))
    for sc in v.scenarios:
        parts += [
            f"<h2>{escape(sc.name)} scenario (batch {sc.batch})</h2>",
            f"<p>Speedup {escape(fmt_speedup(sc.speedup))}</p>",
            _table(STAT_COLUMNS, sc.rows),
            "<p class='muted'>Latency distribution per arm: every timed run, log time axis; dashed p50, dotted p99.</p>",
            distribution_svg(sc.timings),
            "<p class='muted'>Mean run time of each block, round by round (arms interleaved).</p>",
            blocks_svg(sc.timings),
        ]
    for name, why in v.skipped.items():
        parts.append(f"<h2>{escape(name)} scenario</h2><p class='muted'>skipped: {escape(why)}</p>")
    parts += [
        "<h2>Validity checks</h2>",
        _table(
            ("check", "result", "detail"),
            [[c["name"], "OK" if c["ok"] else "FAIL", c["detail"]] for c in v.checks],
            classes=[("ok" if c["ok"] else "fail") for c in v.checks],
        ),
        "<ul>" + "".join(f"<li>{escape(x)}</li>" for x in v.audit_lines + v.warnings) + "</ul>",
        "<h2>Output parity</h2>",
        _table(
            ("output", "dtype", "parity", "max abs", "max rel", "mismatched", "tolerance"),
            v.parity_rows,
        ),
        "<h2>Method</h2>",
        _table(("setting", "value"), v.method_rows),
        "<h2>Environment</h2>",
        _table(("", ""), v.environment_rows),
        "<h2>Subjects</h2>",
        _table(("subject", "sha256"), v.subjects),
        f"<p class='muted'>Signed by install key <code>{escape(v.signer)}</code> on "
        f"{escape(v.created)}. Check it with <code>luminal report verify</code>, which also "
        "recomputes every number on this page from the raw timings.</p>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _table(
    header: Sequence[str], rows: Sequence[Sequence[str]], classes: Sequence[str] = ()
) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        cls = f" class='{classes[i]}'" if i < len(classes) else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    return [lo + (hi - lo) * k / (n - 1) for k in range(n)]


def speedup_svg(scenarios: Sequence[ScenarioView]) -> str:
    w, row, left, right = 720, 34, 110, 30
    h = 40 + row * len(scenarios)
    lows = [min(s.speedup["lower"], 1.0) for s in scenarios]
    highs = [max(s.speedup["upper"], 1.0) for s in scenarios]
    lo, hi = min(lows), max(highs)
    pad = (hi - lo) * 0.15 or 0.1
    lo, hi = max(0.0, lo - pad), hi + pad

    def x(val: float) -> float:
        return left + (val - lo) / (hi - lo) * (w - left - right)

    out = [
        f"<svg width='{w}' height='{h}' role='img' aria-label='speedup with confidence interval'>"
    ]
    out.append(
        f"<line x1='{x(1):.1f}' y1='8' x2='{x(1):.1f}' y2='{h - 22}' stroke='#cf222e' "
        "stroke-dasharray='4 3'/>"
    )
    out.append(f"<text x='{x(1) + 4:.1f}' y='16' fill='#cf222e'>1.0 (no change)</text>")
    for t in _ticks(lo, hi):
        out.append(f"<text x='{x(t):.1f}' y='{h - 6}' text-anchor='middle'>{t:.2f}x</text>")
    for i, s in enumerate(scenarios):
        y = 30 + i * row
        sp = s.speedup
        out += [
            f"<text x='6' y='{y + 4}'>{escape(s.name)}</text>",
            f"<line x1='{x(sp['lower']):.1f}' y1='{y}' x2='{x(sp['upper']):.1f}' y2='{y}' "
            "stroke='#1f6feb' stroke-width='3'/>",
            *(
                f"<line x1='{x(b):.1f}' y1='{y - 7}' x2='{x(b):.1f}' y2='{y + 7}' stroke='#1f6feb' stroke-width='2'/>"
                for b in (sp["lower"], sp["upper"])
            ),
            f"<circle cx='{x(sp['point']):.1f}' cy='{y}' r='5' fill='#1f6feb'/>",
            f"<text x='{x(sp['point']):.1f}' y='{y - 10}' text-anchor='middle'>{sp['point']:.3f}x</text>",
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
    w, panel, left, right = 720, 110, 110, 30
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
        out.append(f"<text x='6' y='{top + 14}' font-weight='600'>{escape(arm)}</text>")
        out.append(f"<text x='6' y='{top + 30}'>{xs.size} runs</text>")
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
                out.append(
                    f"<line x1='{x(val):.1f}' y1='{top + 4 + 12 * row}' x2='{x(val):.1f}' y2='{base}' "
                    f"stroke='#1f2328' stroke-dasharray='{dash}'/><text x='{x(val) + 3:.1f}' "
                    f"y='{top + 12 + 12 * row}'>p{q} {fmt_time(val)}</text>"
                )
    for t in np.geomspace(lo, hi, 5):
        out.append(f"<text x='{x(t):.1f}' y='{h - 6}' text-anchor='middle'>{fmt_time(t)}</text>")
    out.append("</svg>")
    return "".join(out)


def blocks_svg(timings: Mapping[str, list[list[int]]]) -> str:
    means = {arm: [sum(b) / len(b) for b in blocks] for arm, blocks in timings.items()}
    allv = [m for ms in means.values() for m in ms]
    n = max(len(ms) for ms in means.values())
    lo, hi = min(allv), max(allv)
    pad = (hi - lo) * 0.1 or hi * 0.05 or 1
    lo, hi = max(0.0, lo - pad), hi + pad
    w, h, left, right, top, bottom = 720, 170, 110, 30, 10, 24

    def x(i: float) -> float:
        return left + i / max(n - 1, 1) * (w - left - right)

    def y(val: float) -> float:
        return top + (hi - val) / (hi - lo) * (h - top - bottom)

    out = [f"<svg width='{w}' height='{h}' role='img' aria-label='block means per round'>"]
    for t in _ticks(lo, hi, 4):
        out.append(
            f"<line x1='{left}' y1='{y(t):.1f}' x2='{w - right}' y2='{y(t):.1f}' stroke='#eaeef2'/>"
            f"<text x='{left - 6}' y='{y(t) + 4:.1f}' text-anchor='end'>{fmt_time(t)}</text>"
        )
    for k, (arm, ms) in enumerate(means.items()):
        pts = " ".join(f"{x(i):.1f},{y(m):.1f}" for i, m in enumerate(ms))
        color = COLORS.get(arm, "#444")
        out.append(f"<polyline points='{pts}' fill='none' stroke='{color}' stroke-width='1.5'/>")
        out.append(
            f"<text x='6' y='{top + 14 + 16 * k}' fill='{color}' font-weight='600'>{escape(arm)}</text>"
        )
    out.append(
        f"<text x='{(left + w - right) / 2:.0f}' y='{h - 6}' text-anchor='middle'>round (1..{n})</text>"
    )
    out.append("</svg>")
    return "".join(out)
