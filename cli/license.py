"""`luminal license ...`: show, request, install, activate, check, trust, revoke, clock-reset."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from luminal.cli.options import JsonOption
from luminal.errors import UsageError
from luminal.licensing import activation, chain, clockreset, enforce, evaluation, keys, status
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
    kind = "EVALUATION" if st.evaluation else "commercial"
    key = "production key" if st.production_key else "NOT a production key"
    terms = f"; {evaluation.TERMS_NOTE}" if st.evaluation else ""
    return (
        f"license {c.license_id} ({kind}) for {c.licensee.name}: {st.state}, expires "
        f"{day(c.expires_at)}; signed by {st.signer.keyid} ({key}){terms}"
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
        eval_terms = info.get("evaluation", False)
        share_note = " [EVALUATION terms, not billable]" if eval_terms else ""
        rows = [
            ("license", f"{lic['license_id']} ({'EVALUATION' if eval_terms else 'commercial'})"),
            ("licensee", f"{lic['licensee']['name']} ({lic['licensee']['id']})"),
            ("issued", lic["issued_at"]),
            ("valid from", lic["not_before"]),
            ("expires", f"{lic['expires_at']} (+{lic['grace_days']} days grace)"),
            ("targets", ", ".join(e["targets"])),
            ("features", ", ".join(e["features"])),
            ("devices", str(e["devices"])),
            ("share", f"{p['share']} of measured savings ({p['currency']}){share_note}"),
            ("price book", f"{book}{share_note}"),
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
    key_file: Annotated[
        Path, typer.Argument(help="A root certificate (.cert.json), or a .pub.json key.")
    ],
    evaluation_key: Annotated[
        bool,
        typer.Option("--evaluation", help="Trust an uncertified .pub.json as an evaluation key."),
    ] = False,
) -> None:
    """Trust a signing key: root-certified, or (--evaluation) for evaluation licenses only.

    Examples:

      luminal license trust vendor-2026.cert.json

      luminal license trust trial.pub.json --evaluation
    """
    home = Home.resolve()
    home.ensure()
    data = _json_file(key_file)
    if isinstance(data, dict) and "payloadType" in data:
        key = chain.verify_certificate(data, keys.load_keyring(home.trusted_keys))
        keys.store_certificate(home.trusted_keys, data)
        typer.echo(
            f"trusting key {key.keyid} in {home.trusted_keys}: certified by root "
            f"{key.certified_by}, valid {key.window()}"
        )
        return
    if not evaluation_key:
        raise UsageError(
            f"{key_file} is not certified by the vendor root: trust a .cert.json from the "
            "vendor, or pass --evaluation to trust it for evaluation licenses only"
        )
    key = keys.read_public_key_file(key_file)
    keys.trust_locally(home.trusted_keys, key)
    typer.echo(
        f"trusting key {key.keyid} in {home.trusted_keys}: NOT a production key; it can only "
        f"sign evaluation licenses (<= {evaluation.MAX_DAYS} days, <= "
        f"{evaluation.MAX_DEVICES} devices)"
    )


def _json_file(path: Path) -> object:
    try:
        return json.loads(read_file(path, "key file"))
    except (ValueError, RecursionError) as err:
        raise UsageError(f"key file {path}: not JSON ({err})") from None


@license_app.command("clock-reset-request")
def clock_reset_request_cmd(
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the request.")],
) -> None:
    """Write a clock reset request (after the clock ran ahead) for your vendor to answer.

    Examples:

      luminal license clock-reset-request -o reset-request.json
    """
    home = Home.resolve()
    identity = load_or_create(home)
    write_atomic(output, clockreset.make_request(identity, home).dumps(), mode=0o644)
    typer.echo(
        f"{output}: clock reset request for install {identity.keyid}; send it to your vendor "
        "(`luminal-vendor clock-reset`), then run `luminal license clock-reset TOKEN.json`"
    )


@license_app.command("clock-reset")
def clock_reset_cmd(
    token: Annotated[Path, typer.Argument(help="The vendor's clock reset token.")],
) -> None:
    """Apply a vendor-signed clock reset token: the clock record takes the vendor's time.

    Examples:

      luminal license clock-reset token.json
    """
    home = Home.resolve()
    identity = load_or_create(home)
    ring = keys.load_keyring(home.trusted_keys)
    t = clockreset.apply_token(read_file(token, "token"), str(token), identity, home, ring)
    typer.echo(f"clock record reset to the vendor's time {t:%Y-%m-%dT%H:%M:%SZ}")


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
