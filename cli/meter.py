"""`luminal meter show|verify|export|sync`: the usage ledger, its fee statement, its exports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from luminal.cli.options import JsonOption
from luminal.errors import IntegrityError, UsageError
from luminal.licensing import activation, dsse
from luminal.licensing.home import Home, read_file, write_atomic
from luminal.licensing.identity import load_or_create
from luminal.licensing.timeutil import utcnow
from luminal.metering.ledger import Ledger, LedgerVerdict, RecordKind, verify
from luminal.metering.ledger.export import make_export, read_export
from luminal.metering.usage.statement import Period, Statement, build

meter_app = typer.Typer(
    no_args_is_help=True, help="The usage ledger: fee statement, verification, export, sync."
)

LedgerOpt = Annotated[
    Path | None,
    typer.Option("--ledger", help="Ledger folder (default: $LUMINAL_HOME/ledger)."),
]


def _ledger(folder: Path | None) -> Ledger:
    return Ledger(folder) if folder is not None else Ledger.of()


def _verified(ledger: Ledger) -> LedgerVerdict:
    verdict = verify(ledger.folder)
    if verdict.problem is not None:
        raise IntegrityError(f"ledger {verdict.path}: {verdict.problem.message}")
    return verdict


def statement_table(s: Statement) -> Table:
    """The statement as a table: what `meter show` and `luminal-vendor invoice` print."""
    terms = "production" if s.production else "evaluation"
    table = Table(
        title=f"usage {s.period.name}: license {s.license_id or '-'} ({terms}), "
        f"share {s.share or '-'}, {s.currency}",
        box=box.SIMPLE,
    )
    for name in (
        "artifact",
        "calls",
        "device-h",
        "report",
        "speedup≥",
        "price/h",
        "savings",
        "fee",
    ):
        table.add_column(name, justify="left" if name in ("artifact", "report") else "right")
    for ln in s.lines:
        table.add_row(
            ln.artifact.removeprefix("sha256:")[:12],
            str(ln.calls),
            f"{ln.device_hours:.6f}",
            (ln.report or "-")[:12],
            (ln.speedup_lower and f"{float(ln.speedup_lower):.3f}") or "-",
            "-" if ln.price_per_hour is None else str(ln.price_per_hour),
            str(ln.savings),
            str(ln.fee),
            ln.note,
        )
    table.add_row(
        "total",
        str(sum(ln.calls for ln in s.lines)),
        f"{s.device_hours:.6f}",
        "",
        "",
        "",
        str(s.savings),
        str(s.fee),
        "",
        style="bold",
    )
    return table


def print_statement(s: Statement, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(s.to_json(), indent=2))
        return
    console = Console(width=140)
    console.print(statement_table(s))
    over = sum((ln.over_entitlement_hours for ln in s.lines), start=0)
    if over:
        console.print(f"over the license's device count: {over:.6f} device-hours", highlight=False)


@meter_app.command("show")
def show_cmd(
    period: Annotated[
        str | None, typer.Option("--period", help="A month, YYYY-MM (default: this one).")
    ] = None,
    ledger: LedgerOpt = None,
    as_json: JsonOption = False,
) -> None:
    """The fee statement for a month (default: this one), as a table or JSON.

    Per artifact: device-hours, the report it is billed on, price and share from the
    license, savings and fee; totals.  The ledger is verified first (exit 4 naming the first bad record).

    Examples:

      luminal meter show

      luminal meter show --period 2026-11 --json
    """
    p = Period.parse(period) if period else Period.containing(utcnow())
    led = _ledger(ledger)
    _verified(led)
    print_statement(build(led.records(), p), as_json)


@meter_app.command("verify")
def verify_cmd(ledger: LedgerOpt = None, as_json: JsonOption = False) -> None:
    """Check the whole ledger and name the first bad record (exit 4).

    Every hash, link, sequence number, clock and value.  A record cut short by a crash is
    reported as pending, not as tampering.

    Examples:

      luminal meter verify

      luminal meter verify --ledger /backup/ledger --json
    """
    verdict = verify(_ledger(ledger).folder)
    if as_json:
        typer.echo(json.dumps(verdict.to_json(), indent=2))
    elif verdict.ok:
        pending = (
            f"; pending: {verdict.pending_bytes} bytes of a record cut short by a crash "
            "(not tampering; the next append removes them)"
            if verdict.pending_bytes
            else ""
        )
        typer.echo(f"{verdict.path}: OK, {verdict.records} records{pending}")
    if verdict.problem is not None:
        if as_json:
            raise typer.Exit(IntegrityError.exit_code)
        raise IntegrityError(
            f"ledger {verdict.path}: {verdict.problem.message} "
            f"({verdict.records} records verify before it)"
        )


@meter_app.command("export")
def export_cmd(
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the export.")],
    since_last: Annotated[
        bool, typer.Option("--since-last", help="Records since the last export (the default).")
    ] = True,
    from_size: Annotated[
        int | None,
        typer.Option("--from", help="Records from this tree size (re-export after a lost file)."),
    ] = None,
    ledger: LedgerOpt = None,
    as_json: JsonOption = False,
) -> None:
    """Write a signed usage export of the records since the last one.

    The export holds the new records, a signed checkpoint and the proof that it extends
    the previous export.  For a site with no network: carry the file to the vendor
    (`luminal-vendor ingest-usage`).

    Examples:

      luminal meter export --since-last -o usage-2026-11.json

      luminal meter export --from 1200 -o usage-again.json
    """
    led = _ledger(ledger)
    home = Home(led.folder.parent) if ledger is not None else Home.resolve()
    console = Console(stderr=True, quiet=as_json)
    with console.status("verifying the ledger and signing the export"):
        envelope, export = make_export(led, load_or_create(home), from_size)
        try:
            write_atomic(output, envelope.dumps(), mode=0o644)
        except OSError as err:
            raise UsageError(f"--output {output}: cannot write: {err.strerror}") from None
    info = {
        "export": str(output),
        "digest": export.digest,
        "from": export.since_size,
        "tree_size": export.checkpoint.tree_size,
        "root": export.checkpoint.root,
        "records": len(export.records),
    }
    if as_json:
        typer.echo(json.dumps(info, indent=2))
    else:
        which = (
            f"records {export.since_size}..{export.checkpoint.tree_size - 1}"
            if export.records
            else f"no records since the last export (tree size {export.since_size})"
        )
        typer.echo(
            f"{output}: {which}, checkpoint {export.checkpoint.root[:16]}, "
            f"digest {export.digest[:16]}"
        )


@meter_app.command("sync")
def sync_cmd(
    export_file: Annotated[
        Path | None,
        typer.Argument(help="An export to send (default: export the records since the last)."),
    ] = None,
    server: Annotated[
        str | None,
        typer.Option("--server", help="Vendor service URL (default: the license's endpoint)."),
    ] = None,
    key: Annotated[
        str,
        typer.Option("--key", envvar="LUMINAL_ACTIVATION_KEY", help="Your activation (API) key."),
    ] = "",
    ca_bundle: Annotated[
        Path | None, typer.Option("--ca-bundle", help="CA certificates (PEM) to trust.")
    ] = None,
    ledger: LedgerOpt = None,
    as_json: JsonOption = False,
) -> None:
    """Upload a usage export to the vendor service (HTTPS, with retries).

    Sending the same export again is harmless: the service keeps it once, by its digest.
    The answer is recorded in the ledger (`vendor-ack`).

    Examples:

      luminal meter sync --server https://license.example.com --key lk_...

      luminal meter sync usage-2026-11.json
    """
    led = _ledger(ledger)
    home = Home(led.folder.parent) if ledger is not None else Home.resolve()
    identity = load_or_create(home)
    url = server or _endpoint(home)
    if not key:
        raise UsageError("--key: give your activation key (or set LUMINAL_ACTIVATION_KEY)")
    if export_file is None:
        envelope, export = make_export(led, identity)
    else:
        envelope = dsse.Envelope.loads(read_file(export_file, "usage export"))
        export = read_export(envelope, identity.public_key)
    answer = activation.upload_usage(url, key, envelope, identity, ca_bundle=ca_bundle)
    led.append(
        RecordKind.VENDOR_ACK,
        {
            "tree_size": export.checkpoint.tree_size,
            "root": export.checkpoint.root,
            "digest": export.digest,
            "receipt": str(answer.get("id", "")),
        },
    )
    if as_json:
        typer.echo(json.dumps({"digest": export.digest, **answer}, indent=2))
    else:
        again = " (already received: nothing added)" if answer.get("duplicate") else ""
        typer.echo(
            f"sent records {export.since_size}..{export.checkpoint.tree_size - 1} to {url}: "
            f"receipt {answer.get('id')}{again}"
        )


def _endpoint(home: Home) -> str:
    from luminal.licensing.enforce import check

    endpoint = check(None, home=home).claims.metering.endpoint
    if not endpoint:
        raise UsageError("--server: the license names no metering endpoint; give --server URL")
    return endpoint
