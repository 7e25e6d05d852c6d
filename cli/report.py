"""`luminal report show|verify REPORT`: render a signed benchmark report, or check it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from luminal.errors import InvalidResult, UsageError
from luminal.licensing.evaluation import TERMS_NOTE
from luminal.licensing.home import write_atomic
from luminal.licensing.terms import TermsKind
from luminal.metering import report
from luminal.metering.report import html, junit, markdown
from luminal.metering.report.view import (
    STAT_COLUMNS,
    ReportView,
    fmt_speedup,
    headline_line,
    view,
)

FORMATS = ("table", "html", "markdown", "junit", "json")

report_app = typer.Typer(no_args_is_help=True, help="Signed benchmark reports: show, verify.")

ReportArg = Annotated[Path, typer.Argument(help="A report written by `luminal bench`.")]
FailBelow = Annotated[
    float | None,
    typer.Option(
        "--fail-below",
        help="Exit 1 when the speedup's lower confidence bound is below this (exit 5 when "
        "the run is INVALID).",
    ),
]


@report_app.command("show")
def show_cmd(
    path: ReportArg,
    fmt: Annotated[
        str, typer.Option("--format", "-f", help=f"One of: {', '.join(FORMATS)}.")
    ] = "table",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
    fail_below: FailBelow = None,
) -> None:
    """Render a report: a table, one self-contained HTML page, markdown, JUnit XML or JSON.

    Showing does not check the signature: `luminal report verify` does.  With
    --fail-below it renders first, then exits 1 when the speedup's lower bound is below the
    bar and 5 when the run is INVALID (and JUnit XML has that gate as a test case).

    Examples:

      luminal report show report.json

      luminal report show report.json --format html -o report.html

      luminal report show report.json --format markdown >> "$GITHUB_STEP_SUMMARY"
    """
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt}: choose from {', '.join(FORMATS)}")
    _, statement = report.read(path)
    if fmt == "table":
        if output is not None:
            raise UsageError("--output needs --format html, markdown, junit or json")
        print_summary(Console(), statement)
        gate(statement["predicate"]["results"], fail_below)
        return
    text = {
        "html": lambda: html.render(statement),
        "markdown": lambda: markdown.render(statement),
        "junit": lambda: junit.render(statement, fail_below),
        "json": lambda: json.dumps(statement, indent=2) + "\n",
    }[fmt]()
    if output is None:
        typer.echo(text, nl=False)
    else:
        try:
            write_atomic(output, text.encode(), mode=0o644)
        except OSError as err:
            raise UsageError(f"{output}: cannot write ({err.strerror})") from None
        typer.echo(str(output))
    gate(statement["predicate"]["results"], fail_below)


LicenseOpt = Annotated[
    Path | None,
    typer.Option(
        "--license", help="The license the report was made under (default: the installed one)."
    ),
]
ArtifactOpt = Annotated[
    Path | None, typer.Option("--artifact", help="The .lmnl measured: must be its digest.")
]
ModelOpt = Annotated[
    Path | None, typer.Option("--model", help="The baseline model measured: must be its digest.")
]
InputsOpt = Annotated[
    Path | None, typer.Option("--inputs", help="The inputs file measured: must be its digest.")
]
OptionsOpt = Annotated[
    Path | None,
    typer.Option("--baseline-options", help="The baseline's options file: must be its digest."),
]


@report_app.command("verify")
def verify_cmd(
    path: ReportArg,
    license_file: LicenseOpt = None,
    key: Annotated[
        str | None,
        typer.Option(
            "--key",
            help="Signer's public key: a file (install.json, PEM) or base64 (default: the "
            "install the license binds, or this install's for a floating license).",
        ),
    ] = None,
    artifact: ArtifactOpt = None,
    model: ModelOpt = None,
    inputs: InputsOpt = None,
    baseline_options: OptionsOpt = None,
    files: Annotated[
        list[Path] | None,
        typer.Option("--file", help="A file (artifact, model, inputs) that must be a subject."),
    ] = None,
    fail_below: FailBelow = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
) -> None:
    """Check the report against its license and signer, and recompute every number.

    The license's signature chain, its id and digest, its terms (share, price, currency,
    evaluation or production) and the install key it binds must all match the report;
    every derived number is recomputed from the raw timings. Exit 4 naming the field that
    differs; with --fail-below, exit 5 for an INVALID run and 1 when the speedup's lower
    bound is below.

    Examples:

      luminal report verify report.json

      luminal report verify report.json --license license.json --artifact model.lmnl

      luminal report verify report.json --fail-below 1.2
    """
    verified = report.verify(
        path,
        report.customer_license(license_file),
        report.load_key(key) if key else None,
        report.Evidence(tuple(files or ()), artifact, model, inputs, baseline_options),
    )
    print_verified(path, verified, as_json)
    gate(verified.results, fail_below)


def print_verified(path: Path, verified: report.Verified, as_json: bool) -> None:
    """What `report verify` and `luminal-vendor verify-report` say about a good report."""
    r = verified.results
    terms = "evaluation terms, not billable" if verified.evaluation else "production terms"
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "ok": True,
                    "keyid": verified.keyid,
                    "license": verified.license_id,
                    "terms": "evaluation" if verified.evaluation else "production",
                    "compared": verified.compared,
                    "verdict": r["validity"]["verdict"],
                    "speedup": r["speedup"],
                    "savings": r["savings"],
                },
                indent=2,
            )
        )
    else:
        typer.echo(
            f"{path}: OK, signed by install key {verified.keyid} under license "
            f"{verified.license_id} ({terms}); {verified.compared} derived values recomputed "
            f"from the raw timings and equal; {r['validity']['verdict']}; {headline_line(r)}"
        )


def gate(results: Mapping[str, Any], fail_below: float | None) -> None:
    """The CI gate: exit 5 for an INVALID run, 1 when the lower bound is below the bar."""
    if fail_below is None:
        return
    if not results["validity"]["valid"]:
        raise InvalidResult(f"the run is INVALID ({'; '.join(results['validity']['reasons'])})")
    lower = results["speedup"]["lower"] if results["speedup"] else 0.0
    if lower < fail_below:
        typer.echo(
            f"error: speedup lower bound {lower:.3f} is below --fail-below {fail_below:g}",
            err=True,
        )
        raise typer.Exit(1)


def print_summary(console: Console, statement: Mapping[str, Any]) -> None:
    v = view(statement)
    style = "bold green" if v.verdict == "VALID" else "bold red"
    console.print(f"[bold]{v.title}[/]: [{style}]{v.verdict}[/]", highlight=False)
    for sc in v.scenarios:
        table = Table(
            title=f"{sc.name} (batch {sc.batch}): {sc.speedup_line}",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            pad_edge=False,
        )
        for col in STAT_COLUMNS:
            table.add_column(col, justify="left" if col == "arm" else "right", no_wrap=True)
        for row in sc.rows:
            table.add_row(*row)
        console.print(table)
        if sc.generation_line:
            console.print(sc.generation_line, highlight=False)
    for name, why in v.skipped.items():
        console.print(f"{name}: skipped ({why})", highlight=False)
    checks = Table(title="checks", title_justify="left", show_header=False)
    checks.add_column("check")
    checks.add_column("result")
    checks.add_column("detail")
    for c in v.checks:
        checks.add_row(c["name"], "[green]OK[/]" if c["ok"] else "[red]FAIL[/]", c["detail"])
    console.print(checks)
    for w in v.warnings:
        console.print(f"[yellow]warning:[/] {w}", highlight=False)
    console.print(verdict_panel(v), highlight=False)
    pricing = statement["predicate"].get("pricing") or {}
    if pricing.get("terms") == TermsKind.EVALUATION.value:
        console.print(f"[yellow]terms:[/] {TERMS_NOTE} ({pricing.get('source')})", highlight=False)


def verdict_panel(v: ReportView) -> Panel:
    """The summary's last word: a VALID run's billable speedup and savings; an INVALID run's
    reasons in words and what to do, and no speedup at all."""
    if v.verdict == "VALID":
        body = Text(f"speedup {fmt_speedup(v.headline)}\n{v.savings_line}")
        return Panel(body, title="VALID", title_align="left", border_style="green")
    body = Text("\n".join(f"- {why}" for why in v.why))
    if v.fix:
        body.append(f"\nTo fix: {v.fix}", style="bold")
    body.append("\nNo speedup is reported and nothing is billed for an INVALID run.")
    return Panel(body, title="INVALID: why", title_align="left", border_style="red")
