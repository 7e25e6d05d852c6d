"""`luminal-vendor`: the vendor's tool.  Keys, licenses, activation, report checks, service.

    luminal-vendor root-keygen -o offline/root-2025         # once; its .pub.json goes in keyring.json
    luminal-vendor keygen -o keys/vendor-2025
    luminal-vendor certify keys/vendor-2025.pub.json --root-key offline/root-2025.key
    luminal-vendor issue -k keys/vendor-2025.key --terms acme.json --floating -o acme.license.json
    luminal-vendor activate request.json -k keys/vendor-2025.key --terms acme.json -o license.json
    luminal-vendor verify-report report.json --license license.json
    luminal-vendor audit report.json --license license.json --artifact m.lmnl --model m.onnx
    luminal-vendor ingest-usage usage.json --license license.json --db sqlite:///vendor.db
    luminal-vendor invoice --period 2026-11 --licensee acme --db sqlite:///vendor.db
    luminal-vendor licensee add acme --terms acme.json --max-installs 4 --db sqlite:///vendor.db
    luminal-vendor serve -k keys/vendor-2025.key --db sqlite:///vendor.db --port 8443
    luminal-vendor clock-reset reset-request.json -k keys/vendor-2025.key -o token.json

A signing key signs production licenses once `certify` has written `PREFIX.cert.json` beside
`PREFIX.key`; without it, its licenses install only where the key is trusted locally for
evaluation (`luminal license trust KEY.pub.json --evaluation`), as evaluation licenses.

Errors are one line on stderr with luminal's exit codes (2 usage, 3 license, 4 integrity).
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from typer.core import TyperGroup

from luminal.errors import LuminalError, UsageError
from luminal.licensing import clockreset
from luminal.licensing.chain import Certificate, KeyPurpose, certify
from luminal.licensing.home import create_exclusive, read_file, write_atomic
from luminal.licensing.keys import (
    encode_public,
    key_id,
    load_private,
    private_pem,
    public_key_file,
    read_public_key_file,
)
from luminal.licensing.license import (
    Binding,
    Entitlements,
    LicenseClaims,
    Licensee,
    Metering,
    Pricing,
)
from luminal.licensing.pricing import to_decimal
from luminal.licensing.request import load_request
from luminal.licensing.timeutil import from_iso, to_iso, utcnow
from luminal_vendor.artifact_cli import artifact_app
from luminal_vendor.billing_cli import ingest_usage_cmd, invoice_cmd
from luminal_vendor.issuer import (
    Signer,
    Terms,
    bind_to,
    certificate_path,
    clock_reset_token,
    issue,
)
from luminal_vendor.reports import audit_cmd, verify_report_cmd, verify_usage_cmd


class _Group(TyperGroup):
    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LuminalError as err:
            typer.echo(f"error: {err}", err=True)
            ctx.exit(err.exit_code)


app = typer.Typer(
    cls=_Group,
    name="luminal-vendor",
    help="Vendor tools: signing keys, licenses, activation, report checks and the service.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
licensee_app = typer.Typer(help="Licensees of the online service and their API keys.")
app.add_typer(licensee_app, name="licensee")
app.add_typer(artifact_app, name="artifact")

SigningKey = Annotated[Path, typer.Option("--signing-key", "-k", help="Vendor private key (PEM).")]
Output = Annotated[Path, typer.Option("--output", "-o", help="Where to write the license.")]
Db = Annotated[
    str,
    typer.Option("--db", envvar="LUMINAL_VENDOR_DB", help="sqlite:///PATH or postgresql://URL."),
]
TermsOpt = Annotated[Path | None, typer.Option("--terms", help="Terms JSON (see docs).")]
LicenseeOpt = Annotated[str | None, typer.Option("--licensee", help="Licensee id (no --terms).")]
TargetsOpt = Annotated[str, typer.Option("--targets", help="Comma list: cpu,cuda,rocm,asic:NAME.")]
FeaturesOpt = Annotated[str, typer.Option("--features", help="Comma list of features.")]
DevicesOpt = Annotated[int, typer.Option("--devices", help="Devices allowed.")]
DaysOpt = Annotated[int | None, typer.Option("--days", help="Valid for N days from now.")]
GraceOpt = Annotated[int | None, typer.Option("--grace-days", help="Grace after expiry.")]
ShareOpt = Annotated[str, typer.Option("--share", help="Share of savings, e.g. 1/3.")]
PriceOpt = Annotated[
    list[str] | None, typer.Option("--price", help="CLASS=RATE per device-hour (repeatable).")
]
EvalOpt = Annotated[bool, typer.Option("--evaluation", help="Mark as an evaluation license.")]
NotBeforeOpt = Annotated[
    str | None, typer.Option("--not-before", help="ISO time (default: now-1d).")
]
ExpiresOpt = Annotated[str | None, typer.Option("--expires", help="ISO time (overrides --days).")]


def _terms(
    terms: Path | None,
    licensee: str | None,
    targets: str,
    features: str,
    devices: int,
    share: str,
    prices: list[str] | None,
    days: int | None,
    grace_days: int | None,
    evaluation: bool,
) -> Terms:
    if terms is not None:
        base = Terms.load(terms)
    elif licensee:
        book = []
        for item in prices or []:
            name, sep, rate = item.partition("=")
            if not sep or not name:
                raise UsageError(f"--price {item!r}: expected CLASS=RATE")
            book.append((name, to_decimal(rate, f"--price {name}")))
        base = Terms(
            licensee=Licensee(licensee, licensee),
            entitlements=Entitlements(
                targets=tuple(t for t in targets.split(",") if t),
                devices=devices,
                features=tuple(f for f in features.split(",") if f),
            ),
            pricing=Pricing(share=share, currency="USD", price_book=tuple(book)),
            metering=Metering(),
        )
    else:
        raise UsageError("give --terms FILE, or --licensee ID with --targets/--features/...")
    return Terms(
        licensee=base.licensee,
        entitlements=base.entitlements,
        pricing=base.pricing,
        metering=base.metering,
        days=days if days is not None else base.days,
        grace_days=grace_days if grace_days is not None else base.grace_days,
        evaluation=evaluation or base.evaluation,
    )


def _write_license(
    terms: Terms,
    signing_key: Path,
    binding: Binding,
    output: Path,
    not_before: str | None,
    expires: str | None,
) -> LicenseClaims:
    claims, envelope = issue(
        terms,
        Signer.load(signing_key),
        binding,
        not_before=from_iso(not_before, "--not-before") if not_before else None,
        expires_at=from_iso(expires, "--expires") if expires else None,
    )
    write_atomic(output, envelope.dumps(), mode=0o644)
    bound = f"install {binding.install_keyid}" if binding.mode == "install" else "floating"
    typer.echo(
        f"{output}: license {claims.license_id} for {claims.licensee.id} ({bound}), "
        f"valid {to_iso(claims.not_before)} .. {to_iso(claims.expires_at)}"
    )
    return claims


def _new_key(output: Path, valid_days: int, what: str) -> Ed25519PrivateKey:
    """PREFIX.key (private, 0600, never overwritten) and PREFIX.pub.json with a window."""
    key = Ed25519PrivateKey.generate()
    path = Path(f"{output}.key")
    path.parent.mkdir(parents=True, exist_ok=True)
    if not create_exclusive(path, private_pem(key)):
        raise UsageError(f"{path}: exists; refusing to overwrite a {what}")
    now = utcnow()
    public = Signer(key).public(
        not_before=now - timedelta(days=1), not_after=now + timedelta(days=valid_days)
    )
    write_atomic(Path(f"{output}.pub.json"), public_key_file(public), mode=0o644)
    return key


@app.command()
def keygen(
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Path prefix: PREFIX.key, PREFIX.pub.json.")
    ],
    valid_days: Annotated[int, typer.Option(help="Key signs licenses for N days.")] = 5 * 365,
) -> None:
    """Make a signing key: PREFIX.key (private, 0600) and PREFIX.pub.json (to be certified).

    Until `certify` writes PREFIX.cert.json, the key signs only evaluation licenses for
    installs that trust it locally (`luminal license trust PREFIX.pub.json --evaluation`).
    """
    key = _new_key(output, valid_days, "signing key")
    typer.echo(
        f"key {key_id(key.public_key())}: private {output}.key, public {output}.pub.json "
        f"(not certified: run `luminal-vendor certify {output}.pub.json --root-key ROOT.key`)"
    )


@app.command("root-keygen")
def root_keygen(
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Path prefix: PREFIX.key, PREFIX.pub.json.")
    ],
    valid_days: Annotated[int, typer.Option(help="Root certifies keys for N days.")] = 10 * 365,
) -> None:
    """Make the vendor ROOT key: it only certifies signing keys; keep PREFIX.key offline.

    PREFIX.pub.json is the entry for the release keyring (`licensing/keyring.json` "roots").
    """
    key = _new_key(output, valid_days, "root key")
    typer.echo(
        f"root {key_id(key.public_key())}: private {output}.key (keep it offline), public "
        f"{output}.pub.json (add it to the release keyring's roots)"
    )


@app.command("certify")
def certify_cmd(
    public_key: Annotated[Path, typer.Argument(help="The signing key's PREFIX.pub.json.")],
    root_key: Annotated[Path, typer.Option("--root-key", help="The root private key (PEM).")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Default: PREFIX.cert.json beside it.")
    ] = None,
    not_before: NotBeforeOpt = None,
    not_after: Annotated[
        str | None, typer.Option("--not-after", help="ISO time (default: the key file's).")
    ] = None,
) -> None:
    """The root certifies a signing key for a window (default: the window in its .pub.json)."""
    key = read_public_key_file(public_key)
    now = utcnow()
    lo = from_iso(not_before, "--not-before") if not_before else key.not_before or now
    hi = from_iso(not_after, "--not-after") if not_after else key.not_after
    if hi is None:
        raise UsageError(f"{public_key} has no not_after: give --not-after")
    cert = Certificate(
        key.keyid, encode_public(key.public_key), lo, hi, KeyPurpose.LICENSE_SIGNING, now
    )
    envelope = certify(load_private(root_key), cert)
    name = public_key.name.removesuffix(".pub.json").removesuffix(".json")
    out = output or certificate_path(public_key.with_name(f"{name}.key"))
    write_atomic(out, envelope.dumps(), mode=0o644)
    typer.echo(f"{out}: key {key.keyid} certified for {to_iso(lo)} .. {to_iso(hi)}")


@app.command("clock-reset")
def clock_reset_cmd(
    request: Annotated[Path, typer.Argument(help="From `luminal license clock-reset-request`.")],
    signing_key: SigningKey,
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the token.")],
) -> None:
    """Answer an install's clock reset request with a token carrying the vendor's time."""
    req = clockreset.read_request(read_file(request, "request"), str(request))
    token = clock_reset_token(req, Signer.load(signing_key))
    write_atomic(output, token.dumps(), mode=0o644)
    typer.echo(f"{output}: clock reset token for install {req.install_keyid}")


@app.command("issue")
def issue_cmd(
    signing_key: SigningKey,
    output: Output,
    terms: TermsOpt = None,
    request: Annotated[
        Path | None, typer.Option("--request", help="Bind to this install's request.")
    ] = None,
    floating: Annotated[bool, typer.Option("--floating", help="Not bound to one install.")] = False,
    licensee: LicenseeOpt = None,
    targets: TargetsOpt = "cpu",
    features: FeaturesOpt = "compile,bench,report,meter",
    devices: DevicesOpt = 1,
    share: ShareOpt = "1/3",
    price: PriceOpt = None,
    days: DaysOpt = None,
    grace_days: GraceOpt = None,
    evaluation: EvalOpt = False,
    not_before: NotBeforeOpt = None,
    expires: ExpiresOpt = None,
) -> None:
    """Sign a license: bound to an install (--request) or --floating."""
    if (request is None) == (not floating):
        raise UsageError("give exactly one of --request REQUEST.json or --floating")
    t = _terms(
        terms, licensee, targets, features, devices, share, price, days, grace_days, evaluation
    )
    binding = (
        bind_to(load_request(read_file(request, "request"), str(request)))
        if request is not None
        else Binding(mode="floating")
    )
    _write_license(t, signing_key, binding, output, not_before, expires)


@app.command("activate")
def activate_cmd(
    request: Annotated[Path, typer.Argument(help="request.json from `luminal license request`.")],
    signing_key: SigningKey,
    output: Output,
    terms: TermsOpt = None,
    licensee: LicenseeOpt = None,
    targets: TargetsOpt = "cpu",
    features: FeaturesOpt = "compile,bench,report,meter",
    devices: DevicesOpt = 1,
    share: ShareOpt = "1/3",
    price: PriceOpt = None,
    days: DaysOpt = None,
    grace_days: GraceOpt = None,
    evaluation: EvalOpt = False,
    not_before: NotBeforeOpt = None,
    expires: ExpiresOpt = None,
) -> None:
    """Air-gapped activation: sign a license bound to the install that made REQUEST."""
    req = load_request(read_file(request, "request"), str(request))
    t = _terms(
        terms, licensee, targets, features, devices, share, price, days, grace_days, evaluation
    )
    _write_license(t, signing_key, bind_to(req), output, not_before, expires)


app.command("verify-report")(verify_report_cmd)
app.command("verify-usage")(verify_usage_cmd)
app.command("ingest-usage")(ingest_usage_cmd)
app.command("invoice")(invoice_cmd)
app.command("audit")(audit_cmd)


@licensee_app.command("add")
def licensee_add(
    licensee_id: Annotated[str, typer.Argument(help="Licensee id (as in the terms).")],
    terms: Annotated[Path, typer.Option("--terms", help="Terms JSON for this licensee.")],
    db: Db = "sqlite:///vendor.db",
    max_installs: Annotated[int, typer.Option(help="Installs that may activate.")] = 1,
) -> None:
    """Add a licensee to the service database and print its API key (shown once)."""
    from luminal_vendor.storage import Store

    t = Terms.load(terms)
    if t.licensee.id != licensee_id:
        raise UsageError(f"terms {terms} are for licensee {t.licensee.id!r}, not {licensee_id!r}")
    key = (
        Store(db)
        .init()
        .add_licensee(licensee_id, t.licensee.name, t.to_json(), max_installs, to_iso(utcnow()))
    )
    typer.echo(key)


@licensee_app.command("list")
def licensee_list(db: Db = "sqlite:///vendor.db") -> None:
    """Licensees: id, name, installs activated / allowed."""
    from luminal_vendor.storage import Store

    for lid, name, max_installs, used in Store(db).init().licensees():
        typer.echo(f"{lid}\t{name}\t{used}/{max_installs} installs")


@app.command()
def serve(
    signing_key: SigningKey,
    db: Db = "sqlite:///vendor.db",
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8443,
    max_body: Annotated[int, typer.Option(help="Largest request body, bytes (else 413).")] = 64
    * 1024,
    rate: Annotated[int, typer.Option(help="Requests a minute per licensee (else 429).")] = 60,
    replay_window: Annotated[int, typer.Option(help="Seconds a signed request stays fresh.")] = 300,
    ssl_certfile: Annotated[Path | None, typer.Option(help="TLS certificate (PEM).")] = None,
    ssl_keyfile: Annotated[Path | None, typer.Option(help="TLS private key (PEM).")] = None,
) -> None:
    """Run the activation and usage service (starlette on uvicorn)."""
    try:
        import uvicorn

        from luminal_vendor.app import ServiceConfig, create_app
    except ImportError as err:
        raise UsageError(
            f"serve needs starlette and uvicorn: pip install luminal-vendor ({err})"
        ) from None
    from luminal_vendor.storage import Store

    config = ServiceConfig(max_body, rate, timedelta(seconds=replay_window))
    application = create_app(Store(db).init(), Signer.load(signing_key), config)
    if ssl_certfile is None and host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo("warning: serving without TLS; put it behind a TLS proxy", err=True)
    uvicorn.run(
        application,
        host=host,
        port=port,
        ssl_certfile=str(ssl_certfile) if ssl_certfile else None,
        ssl_keyfile=str(ssl_keyfile) if ssl_keyfile else None,
        log_level="warning",
        limit_concurrency=256,
        timeout_keep_alive=5,
    )


def main() -> None:
    """Console-script entry point."""
    sys.exit(app(prog_name="luminal-vendor"))
