"""`luminal-vendor verify-report` and `luminal-vendor audit`: the vendor's checks of a report.

    verify-report REPORT --license L    what `luminal report verify` checks, by the same code
                                        (`metering.report.verify`), trusting only the vendor's
                                        roots (and `--trust-key` evaluation keys): signature
                                        by the install L binds, payload type, terms against
                                        L, subjects, every number recomputed
    verify-usage EXPORT --license L     a usage export signed by the install L binds, whole
                                        (records, checkpoint, proof)
    audit REPORT --license L --artifact A --model M [--inputs I]
                                        all of the above, then the same bench re-run here:
                                        exit 0 when the claimed speedup lies within the
                                        reproduced interval, exit 1 when it lies
                                        above or below

A customer's own verify trusts what its install trusts; the vendor's trusts its release
roots, so a license signed by a key the customer made (or not signed at all) is refused.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from luminal.cli.report import print_verified
from luminal.errors import IntegrityError
from luminal.licensing import dsse, keys
from luminal.licensing.chain import with_certificates
from luminal.licensing.home import read_file
from luminal.licensing.keys import Keyring, decode_public, read_public_key_file
from luminal.metering.report import Evidence, LicenseFile, Verified, verify
from luminal.metering.report.evidence import CheckedLicense, check_license, signer_key
from luminal_vendor.audit import audit
from luminal_vendor.bodies import Limits
from luminal_vendor.usage import UsageExport, UsageRejected, parse_export

ReportArg = Annotated[Path, typer.Argument(help="A signed report from `luminal bench`.")]
LicenseOpt = Annotated[
    Path, typer.Option("--license", help="The license the report was made under.")
]
InstallKeyOpt = Annotated[
    str | None,
    typer.Option("--install-key", help="Install public key (base64): for a floating license."),
]
TrustKeyOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--trust-key", help="A vendor evaluation signing key (PUB.json) to accept (repeatable)."
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
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON only.")]


def vendor_keyring(trust_keys: list[Path] | None) -> Keyring:
    """The release roots (never this machine's local trust), plus evaluation keys named."""
    extra = tuple(replace(read_public_key_file(p), production=False) for p in trust_keys or ())
    ring = keys.shipped_keyring().merged(Keyring(extra))
    return with_certificates(ring, ())


def _verify(
    report: Path,
    license_file: Path,
    install_key: str | None,
    trust_keys: list[Path] | None,
    evidence: Evidence,
) -> Verified:
    lic = LicenseFile(
        read_file(license_file, "license"), str(license_file), vendor_keyring(trust_keys)
    )
    key = decode_public(install_key, "--install-key") if install_key else None
    return verify(report, lic, key, evidence, default_key=False)


def verify_report_cmd(
    report: ReportArg,
    license_file: LicenseOpt,
    install_key: InstallKeyOpt = None,
    trust_keys: TrustKeyOpt = None,
    artifact: ArtifactOpt = None,
    model: ModelOpt = None,
    inputs: InputsOpt = None,
    baseline_options: OptionsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Everything `luminal report verify` checks, against the vendor's roots (exit 4 if not).

    Refuses (exit 4): a license not chaining to a vendor root (or unsigned), a report not
    signed by the install the license binds, another document passed as a report (an
    activation request, a license), terms that differ from the license's, a subject the
    predicate does not record, and any number that differs from its recomputation.
    """
    evidence = Evidence((), artifact, model, inputs, baseline_options)
    verified = _verify(report, license_file, install_key, trust_keys, evidence)
    print_verified(report, verified, as_json)


def usage_key(
    license_file: Path, install_key: str | None, trust_keys: list[Path] | None
) -> tuple[CheckedLicense, Ed25519PublicKey]:
    """The license (verified against the vendor's roots) and the install key that must
    have signed a usage export under it (the bound install, or `--install-key`)."""
    lic = check_license(
        LicenseFile(
            read_file(license_file, "license"), str(license_file), vendor_keyring(trust_keys)
        )
    )
    key = decode_public(install_key, "--install-key") if install_key else None
    return lic, signer_key(lic, {}, key)


def read_usage(export: Path, key: Ed25519PublicKey) -> tuple[dsse.Envelope, UsageExport]:
    envelope = dsse.Envelope.loads(read_file(export, "usage export"))
    try:
        return envelope, parse_export(envelope, Limits(max_bytes=64 * 2**20), key)
    except UsageRejected as err:
        raise IntegrityError(f"usage export {export}: {err}") from None


def verify_usage_cmd(
    export: Annotated[Path, typer.Argument(help="A signed usage export from an install.")],
    license_file: LicenseOpt,
    install_key: InstallKeyOpt = None,
    trust_keys: TrustKeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check a usage export alone: signed by the bound install, whole (exit 4 if not).

    Its records in sequence, its checkpoint and consistency proof; `ingest-usage` also
    checks that it continues what was accepted before."""
    _, key = usage_key(license_file, install_key, trust_keys)
    _, parsed = read_usage(export, key)
    info = {
        "ok": True,
        "keyid": parsed.install_keyid,
        "from": parsed.since_size,
        "tree_size": parsed.checkpoint.tree_size,
        "root": parsed.checkpoint.root,
        "records": len(parsed.records),
        "digest": parsed.digest,
    }
    if as_json:
        typer.echo(json.dumps(info, indent=2))
    else:
        typer.echo(
            f"{export}: OK, usage export of install {parsed.install_keyid}, records "
            f"{parsed.since_size}..{parsed.checkpoint.tree_size - 1}"
        )


def audit_cmd(
    report: ReportArg,
    license_file: LicenseOpt,
    artifact: Annotated[Path, typer.Option("--artifact", help="The .lmnl the report measured.")],
    model: Annotated[Path, typer.Option("--model", help="The baseline model it measured.")],
    inputs: InputsOpt = None,
    baseline_options: OptionsOpt = None,
    install_key: InstallKeyOpt = None,
    trust_keys: TrustKeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Verify REPORT, re-run its bench here, and say whether its claim is reproduced.

    Exit 0 when the claimed speedup lies within the reproduced confidence interval; exit 1
    when it lies above or below it; exit 4 when the report does not verify or the files are not
    the ones it measured. Run it on a machine equivalent to the report's (`machine`).
    """
    evidence = Evidence((), artifact, model, inputs, baseline_options)
    verified = _verify(report, license_file, install_key, trust_keys, evidence)
    result = audit(verified.statement, artifact, model, inputs, baseline_options)
    c, r = result.claimed, result.reproduced
    if as_json:
        typer.echo(json.dumps({"report": str(report), **result.to_json()}, indent=2))
    else:
        typer.echo(
            f"{report}: claimed {c.scenario} speedup {c.point:.3f}x [{c.lower:.3f}, "
            f"{c.upper:.3f}]; reproduced {r.point:.3f}x [{r.lower:.3f}, {r.upper:.3f}] "
            f"({result.verdict}): the claim is {result.finding.value} the reproduced interval"
        )
    if not result.agrees:
        typer.echo(
            f"error: the claimed speedup {c.point:.3f}x lies {result.finding.value} the "
            f"reproduced interval [{r.lower:.3f}, {r.upper:.3f}]: "
            "the report's timings are not what this bench measures",
            err=True,
        )
        raise typer.Exit(1)
