"""A report as GitHub-flavoured markdown (fit for `$GITHUB_STEP_SUMMARY`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from luminal.metering.report.view import STAT_COLUMNS, fmt_speedup, view


def render(statement: Mapping[str, Any]) -> str:
    v = view(statement)
    icon = "✅" if v.verdict == "VALID" else "❌"
    out = [f"## {v.title}: {icon} {v.verdict}", ""]
    if v.headline is not None:
        out += [
            f"**Speedup** ({v.headline['scenario']}): {fmt_speedup(v.headline)}",
            "",
            f"**Savings**: {v.savings_line}",
            "",
        ]
    else:
        out += ["**Why INVALID** (no speedup is reported or billed):", ""]
        out += [f"- {_esc(why)}" for why in v.why] + [""]
        if v.fix:
            out += [f"**To fix**: {_esc(v.fix)}", ""]
    out += [f"Baseline: {_esc(v.baseline)}  ", f"Candidate: {_esc(v.candidate)}", ""]
    for sc in v.scenarios:
        out += [
            f"### {sc.name} (batch {sc.batch}): {sc.speedup_line}",
            "",
            *([_esc(sc.generation_line), ""] if sc.generation_line else []),
            _table(STAT_COLUMNS, sc.rows),
            "",
        ]
    for name, why in v.skipped.items():
        out += [f"### {name}: skipped", "", _esc(why), ""]
    out += [
        "### Checks",
        "",
        _table(
            ("check", "result", "detail"),
            [[c["name"], "✅" if c["ok"] else "❌", _esc(c["detail"])] for c in v.checks],
        ),
        "",
        *(f"- {line}" for line in v.audit_lines),
        *(f"- warning: {_esc(w)}" for w in v.warnings),
        "",
        "<details><summary>Method, parity, environment, subjects</summary>",
        "",
        _table(("setting", "value"), v.method_rows),
        "",
        _table(
            ("output", "dtype", "parity", "max abs", "max rel", "mismatched", "tolerance"),
            v.parity_rows,
        ),
        "",
        _table(("", ""), v.environment_rows),
        "",
        _table(("subject", "sha256"), [[n, f"`{d}`"] for n, d in v.subjects]),
        "",
        f"Signed by install key `{v.signer}` on {v.created}; check with `luminal report verify`.",
        "",
        "</details>",
        "",
    ]
    return "\n".join(out)


def _table(header: tuple[str, ...], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _esc(text: str) -> str:
    return text.replace("<", "&lt;").replace(">", "&gt;")
