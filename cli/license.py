"""`luminal license ...`: show, request, install, activate, check, trust, revoke."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from luminal.cli.options import JsonOption
from luminal.errors import UsageError
from luminal.licensing import activation, enforce, keys, status
from luminal.licensing.home import Home, read_file, write_atomic
from luminal.licensing.identity import load_or_create
from luminal.licensing.license import FEATURES
from luminal.licensing.request import make_request
from luminal.licensing.timeutil import day, utcnow

license_app = typer.Typer(
    help="Licenses: status, air-gapped and online activation, entitlement checks.",
    no_args_is_help=True,
)


def _warn(warnings: tuple[str, ...] | list[str]) -> None:
    for w in warnings:
        typer.echo(f"warning: {w}", err=True)


def _summary(st: enforce.LicenseStatus) -> str:
    c = st.claims
    kind = "evaluation" if c.evaluation else "commercial"
    key = "production key" if st.production_key else "NOT a production key"
    return (
        f"license {c.license_id} ({kind}) for {c.licensee.name}: {st.state}, expires "
        f"{day(c.expires_at)}; signed by {st.signer.keyid} ({key})"
    )


@license_app.command("show")
def show_cmd(as_json: JsonOption = False) -> None:
    """Print this install's license status; exit 3 when it is missing or refused.

    Examples:

      luminal license show

      luminal license show --json
    """
    info = status.describe()
    if as_json:
        typer.echo(json.dumps(info, indent=2))
    else:
        _print_table(info)
    raise typer.Exit(info["exit_code"])


def _print_table(info: dict[str, Any]) -> None:
    states = {"valid": "VALID", "grace": "GRACE PERIOD (expired)", "refused": "REFUSED"}
    table = Table(title="License", title_justify="left", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    table.add_row("status", states.get(info["state"], "NO LICENSE"))
    lic, signer = info["license"], info["signer"]
    if lic:
        e, p, b, m = lic["entitlements"], lic["pricing"], lic["binding"], lic["metering"]
        book = ", ".join(f"{k} {v}/h" for k, v in p["price_book"].items()) or "-"
        bound = f"install {b['install_keyid']}" if b["mode"] == "install" else "floating"
        rows = [
            (
                "license",
                f"{lic['license_id']} ({'evaluation' if lic['evaluation'] else 'commercial'})",
            ),
            ("licensee", f"{lic['licensee']['name']} ({lic['licensee']['id']})"),
            ("issued", lic["issued_at"]),
            ("valid from", lic["not_before"]),
            ("expires", f"{lic['expires_at']} (+{lic['grace_days']} days grace)"),
            ("targets", ", ".join(e["targets"])),
            ("features", ", ".join(e["features"])),
            ("devices", str(e["devices"])),
            ("share", f"{p['share']} of measured savings ({p['currency']})"),
            ("price book", book),
            ("billing basis", f"{p['basis']} ({p['confidence']})"),
            ("bound to", bound),
            ("metering", f"{m['mode']}, every {m['export_interval_days']} days"),
        ]
        for row in rows:
            table.add_row(*row)
    if signer:
        table.add_row("signed by", f"{signer['keyid']} ({signer['trust']})")
    inst = info["install"]
    table.add_row("this install", f"{inst['keyid']} (fingerprint {inst['fingerprint']})")
    table.add_row("clock last seen", info["clock"]["last_seen"] or "-")
    table.add_row("home", info["home"])
    console = Console()
    Console(width=max(console.width, 120)).print(table)
    if signer and not signer["production"]:
        typer.echo(f"NOTE: signing key {signer['keyid']} is NOT a production key (evaluation).")
    _warn(info["warnings"])
    if info["error"]:
        typer.echo(f"error: {info['error']}", err=True)


@license_app.command("request")
def request_cmd(
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the request.")],
) -> None:
    """Write an activation request signed by this install's key (air-gapped activation).

    Examples:

      luminal license request -o request.json
    """
    identity = load_or_create(Home.resolve())
    write_atomic(output, make_request(identity).dumps(), mode=0o644)
    typer.echo(
        f"{output}: activation request for install {identity.keyid} "
        f"(fingerprint {identity.fingerprint}); send it to your vendor, then run "
        "`luminal license install LICENSE.json`"
    )


@license_app.command("install")
def install_cmd(
    license_file: Annotated[Path, typer.Argument(help="The signed license file.")],
) -> None:
    """Verify a license file and make it this install's license.

    Examples:

      luminal license install license.json
    """
    st = activation.install(read_file(license_file, "license"), str(license_file))
    typer.echo(f"installed {_summary(st)}")
    _warn(st.warnings)


@license_app.command("activate")
def activate_cmd(
    server: Annotated[str, typer.Option("--server", help="Vendor service URL (https).")],
    key: Annotated[
        str,
        typer.Option("--key", envvar="LUMINAL_ACTIVATION_KEY", help="Your activation (API) key."),
    ],
    ca_bundle: Annotated[
        Path | None, typer.Option("--ca-bundle", help="CA certificates (PEM) to trust.")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds per HTTP attempt.")] = 10.0,
) -> None:
    """Online activation: get a license bound to this install from the vendor service.

    Proxies come from HTTPS_PROXY / NO_PROXY; TLS is always verified.

    Examples:

      luminal license activate --server https://license.example.com --key lk_...
    """
    st = activation.activate_online(server, key, ca_bundle=ca_bundle, timeout=timeout)
    typer.echo(f"activated {_summary(st)}")
    _warn(st.warnings)


@license_app.command("check")
def check_cmd(
    feature: Annotated[str, typer.Option("--feature", help=f"One of: {', '.join(FEATURES)}.")],
    target: Annotated[str, typer.Option("--target", help="cpu, cuda, rocm or asic:NAME.")],
    devices: Annotated[int | None, typer.Option("--devices", help="Devices to be used.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Exit 0 if the license allows FEATURE on TARGET now; else say why and exit 3.

    Examples:

      luminal license check --feature compile --target cuda
    """
    if feature not in FEATURES:
        raise UsageError(f"--feature {feature!r}: expected one of {', '.join(FEATURES)}")
    st = enforce.check(feature, target, devices=devices)
    if as_json:
        typer.echo(json.dumps(st.to_json(), indent=2))
    else:
        typer.echo(f"OK: {feature} on {target} — {_summary(st)}")
    _warn(st.warnings)


@license_app.command("trust")
def trust_cmd(
    public_key: Annotated[Path, typer.Argument(help="A vendor .pub.json key file.")],
    evaluation: Annotated[
        bool, typer.Option("--evaluation", help="Required: acknowledge a non-production key.")
    ] = False,
) -> None:
    """Trust an evaluation signing key by explicit local setting (never a production key)."""
    if not evaluation:
        raise UsageError("locally trusted keys are evaluation keys only; pass --evaluation")
    home = Home.resolve()
    home.ensure()
    key = keys.read_public_key_file(public_key)
    keys.trust_locally(home.trusted_keys, key)
    typer.echo(f"trusting key {key.keyid} in {home.trusted_keys}: NOT a production key")


@license_app.command("revoke")
def revoke_cmd(
    keyid: Annotated[str, typer.Argument(help="Key id to stop trusting.")],
    reason: Annotated[str, typer.Option(help="Why (shown in errors).")] = "",
) -> None:
    """Revoke a signing key locally (it applies to shipped keys too)."""
    home = Home.resolve()
    home.ensure()
    revocation = keys.Revocation(keyid, day(utcnow()), reason)
    keys.revoke_locally(home.trusted_keys, revocation)
    typer.echo(f"key {keyid} revoked in {home.trusted_keys}")
