"""A report as one self-contained HTML page: inline CSS and inline SVG, no scripts, no
external files.  A VALID run leads with its speedup and the interval of every scenario
against the 1.0 line; an INVALID one with why, in words, and what to do, and no speedup.
Per scenario: the latency distribution of each arm (histogram of every timed run, p50 and
p99 marked) and the block means round by round, with a legend (`charts`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from luminal.metering.report.charts import blocks_svg, distribution_svg, speedup_svg
from luminal.metering.report.view import STAT_COLUMNS, fmt_speedup, view

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;
max-width:1040px;color:#1f2328;padding:0 1rem}
h1{font-size:1.6rem;margin:.2rem 0}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #d0d7de}
table{border-collapse:collapse;margin:.5rem 0;font-variant-numeric:tabular-nums}
td,th{border:1px solid #d0d7de;padding:.25rem .55rem;text-align:left}th{background:#f6f8fa}
.badge{display:inline-block;padding:.15rem .6rem;border-radius:1rem;color:#fff;font-weight:600}
.VALID{background:#1a7f37}.INVALID{background:#cf222e}.ok{color:#1a7f37}.fail{color:#cf222e}
.big{font-size:1.35rem;font-weight:600}
.why{border-left:4px solid #cf222e;background:#fff5f5;padding:.4rem 1rem;margin:1rem 0}.muted{color:#656d76}code{font-size:.85em}
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
    ]
    if v.headline is not None:
        parts += [
            f"<p class='big'>Speedup ({escape(v.headline['scenario'])}): "
            f"{escape(fmt_speedup(v.headline))}</p>",
            f"<p>{escape(v.savings_line)}</p>",
            speedup_svg(v.scenarios),
        ]
    else:  # INVALID: why, in words, and what to do; no speedup to read as a result
        parts.append(
            "<div class='why'><p><b>This run is INVALID: it reports no speedup and bills "
            "nothing.</b> Why:</p><ul>"
            + "".join(f"<li>{escape(why)}</li>" for why in v.why)
            + "</ul>"
            + (f"<p><b>What to do:</b> {escape(v.fix)}.</p>" if v.fix else "")
            + "</div>"
        )
    for sc in v.scenarios:
        parts += [
            f"<h2>{escape(sc.name)} scenario (batch {sc.batch})</h2>",
            f"<p>{escape(sc.speedup_line[:1].upper() + sc.speedup_line[1:])}</p>",
            *([f"<p>{escape(sc.generation_line)}</p>"] if sc.generation_line else []),
            _table(STAT_COLUMNS, sc.rows),
            "<p class='muted'>Latency distribution per arm: every timed run, log time axis; "
            "dashed p50, dotted p99.</p>",
            distribution_svg(sc.timings),
            "<p class='muted'>Mean run time of each block, round by round (the arms "
            "interleaved: round i's two blocks are the pair the speedup's ratio i is of).</p>",
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
