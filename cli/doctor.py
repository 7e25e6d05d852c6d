"""`luminal doctor`: is this install ready to compile, bench and meter?"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from luminal.cli.options import JsonOption
from luminal.errors import SetupIncomplete
from luminal.installers.doctor import CHECKS, DoctorContext, DoctorReport, Status, iter_checks
from luminal.installers.support import write_support_bundle

MARK = {Status.OK: "[green]ok  [/]", Status.WARN: "[yellow]warn[/]", Status.FAIL: "[red]FAIL[/]"}


def doctor_cmd(
    support_bundle: Annotated[
        Path | None,
        typer.Option(
            "--support-bundle",
            help="Also write a .tar.gz for support: these checks, versions, the redacted "
            "environment and the public files of LUMINAL_HOME (never the private key).",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Check this install: Python and package versions, C toolchain, devices, license,
    ledger, free disk, tuning database, and whether the machine is quiet enough to bench.

    One line per check as it finishes (ok, warn, FAIL), then what to do about each
    problem.  Exit 7 when something luminal needs is missing or broken (FAIL); warnings
    alone exit 0.

    Examples:

      luminal doctor

      luminal doctor --json | jq '.checks[] | select(.status != "ok")'

      luminal doctor --support-bundle support.tar.gz
    """
    ctx = DoctorContext.current()
    console = Console(stderr=True, quiet=as_json, highlight=False, soft_wrap=True)
    width = max(len(c.name) for c in CHECKS)
    results = []
    for result in iter_checks(ctx):
        results.append(result)
        console.print(
            f"{MARK[result.finding.status]} {result.name:<{width}}  {result.finding.summary}"
        )
    report = DoctorReport(tuple(results))
    if support_bundle is not None:
        write_support_bundle(support_bundle, ctx, report)
        console.print(f"support bundle: {support_bundle}")
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2, default=str))
    for result in results:
        f = result.finding
        if f.status is not Status.OK and f.fix:
            console.print(f"  {result.name}: {f.fix}")
    if not report.ok:
        raise SetupIncomplete(
            f"doctor: {len(report.failed)} problem(s): "
            + "; ".join(f"{r.name}: {r.finding.summary}" for r in report.failed)
        )
    console.print(
        "[green]ready[/]"
        if all(r.finding.status is Status.OK for r in results)
        else "ready, with warnings"
    )
