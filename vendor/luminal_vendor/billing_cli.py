"""`luminal-vendor ingest-usage` and `luminal-vendor invoice`: usage exports in, statements out.

ingest-usage EXPORT --license L --db URL     verify an export carried from an air-gapped
                                             site and accept it: signed by the install L
                                             binds, every record chained and in bounds,
                                             its licenses the vendor's, and continuing the
                                             last accepted checkpoint (replays, gaps and
                                             forks are refused, exit 4)
invoice --period P --licensee ID --db URL    the fee statement the vendor bills from: the
                                             customer's `luminal meter show` statement,
                                             by the same code, over the accepted records
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from luminal.cli.meter import print_statement
from luminal.errors import UsageError
from luminal.licensing.timeutil import to_iso, utcnow
from luminal.metering.usage.statement import Period, build
from luminal_vendor.reports import (
    InstallKeyOpt,
    JsonOpt,
    LicenseOpt,
    TrustKeyOpt,
    read_usage,
    usage_key,
    vendor_keyring,
)
from luminal_vendor.usage import LedgerRejected, Rejection, check_licenses

Db = Annotated[
    str,
    typer.Option("--db", envvar="LUMINAL_VENDOR_DB", help="sqlite:///PATH or postgresql://URL."),
]


def ingest_usage_cmd(
    export: Annotated[Path, typer.Argument(help="A usage export from `luminal meter export`.")],
    license_file: LicenseOpt,
    db: Db = "sqlite:///vendor.db",
    install_key: InstallKeyOpt = None,
    trust_keys: TrustKeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Accept a usage export into the vendor's records (exit 4 when it is refused).

    Refused: a bad signature, a record edited, missing, swapped, with its clock set back or
    a negative or absurd value; an export accepted before (a replay); one that starts after
    the last accepted checkpoint (a gap) or before it, or from another root (a fork: a
    ledger restored from an old copy); a license the vendor did not sign.

    Examples:

      luminal-vendor ingest-usage usage-2026-11.json --license acme.license.json

      luminal-vendor ingest-usage usage.json --license acme.license.json --db sqlite:///v.db
    """
    from luminal_vendor.storage import Store

    lic, key = usage_key(license_file, install_key, trust_keys)
    envelope, parsed = read_usage(export, key)
    licensee = lic.claims.licensee.id
    store = Store(db).init()
    if not store.licensee(licensee):
        raise UsageError(f"unknown licensee {licensee!r}: `luminal-vendor licensee add` first")
    check_licenses(parsed, vendor_keyring(trust_keys), parsed.install_keyid)
    receipt = store.record_usage(
        licensee,
        parsed.install_keyid,
        to_iso(utcnow()),
        parsed,
        json.dumps(envelope.to_json()),
    )
    if receipt.duplicate:
        raise LedgerRejected(
            Rejection.REPLAY,
            f"{export} was accepted before (receipt {receipt.id}): a replay; nothing added",
        )
    info = {
        "accepted": True,
        "id": receipt.id,
        "licensee": licensee,
        "install": parsed.install_keyid,
        "from": parsed.since_size,
        "tree_size": parsed.checkpoint.tree_size,
        "records": len(parsed.records),
    }
    if as_json:
        typer.echo(json.dumps(info, indent=2))
    else:
        typer.echo(
            f"{export}: accepted records {parsed.since_size}..{parsed.checkpoint.tree_size - 1} "
            f"of install {parsed.install_keyid} ({licensee}), receipt {receipt.id}"
        )


def invoice_cmd(
    period: Annotated[str, typer.Option("--period", help="A month, YYYY-MM.")],
    licensee: Annotated[str, typer.Option("--licensee", help="Licensee id.")],
    install: Annotated[
        str | None,
        typer.Option("--install", help="Install key id (needed when it has several)."),
    ] = None,
    db: Db = "sqlite:///vendor.db",
    as_json: JsonOpt = False,
) -> None:
    """The fee statement for a month from the accepted usage (as `luminal meter show`).

    Computed by the customer's code over the same records, so the two are equal.

    Examples:

      luminal-vendor invoice --period 2026-11 --licensee acme

      luminal-vendor invoice --period 2026-11 --licensee acme --json
    """
    from luminal_vendor.storage import Store

    p = Period.parse(period)
    store = Store(db).init()
    installs = store.ledger_installs(licensee)
    if install is None:
        if len(installs) != 1:
            raise UsageError(
                f"licensee {licensee} has usage from {len(installs)} installs"
                + (f" ({', '.join(installs)}): name one with --install" if installs else "")
            )
        install = installs[0]
    elif install not in installs:
        raise UsageError(f"--install {install}: no accepted usage from it for {licensee}")
    print_statement(build(store.ledger(install), p), as_json)


__all__ = ["ingest_usage_cmd", "invoice_cmd"]
