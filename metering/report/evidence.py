"""What a report must agree with besides its own numbers: its license, its signer, its subjects.

    license file  --verify_license (the license gate's chain)-->  claims, signer key
        |  id, sha256(file)         == predicate.license
        |  share, price, currency,  == predicate.pricing   (licensing.terms.license_terms)
        |  terms kind, device class
        |  binding: install key     == the key that signed the report
        |           fingerprint     == predicate.machine.fingerprint
    predicate.candidate.artifact_digests     == the `artifact:` subjects
    predicate.baseline.model_sha256         == the `baseline-model:` subject
    predicate.baseline.options_file.sha256  == the `baseline-options:` subject
    predicate.inputs.sha256 / file_sha256   == the `inputs` / `inputs-file:` subjects

Every check raises IntegrityError (exit 4) naming the field.  The customer's `report
verify` and the vendor's `verify-report` both run these, with different keyrings: the
customer's install trusts what its license gate trusts; the vendor trusts only its roots.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from luminal.errors import IntegrityError, LicenseError, UsageError
from luminal.licensing.enforce import file_digest, verify_license
from luminal.licensing.keys import Keyring, decode_public, key_id
from luminal.licensing.license import LicenseClaims
from luminal.licensing.terms import COMMAND_LINE, license_terms


@dataclass(frozen=True)
class LicenseFile:
    """A license to check a report against, and the keys its signature may chain to."""

    raw: bytes
    where: str
    keyring: Keyring


@dataclass(frozen=True)
class CheckedLicense:
    claims: LicenseClaims
    evaluation: bool  # held to evaluation terms (an evaluation license or a local key)
    digest: str


def check_license(lic: LicenseFile) -> CheckedLicense:
    """The license gate's signature-chain check (`enforce.verify_license`): dates and this
    machine are not checked, since a report outlives its license's window and is checked
    elsewhere than where it was made."""
    try:
        claims, signer = verify_license(lic.raw, lic.keyring, lic.where)
    except LicenseError as err:
        raise IntegrityError(f"{err}: its terms cannot be trusted") from None
    return CheckedLicense(claims, claims.evaluation or not signer.production, file_digest(lic.raw))


def signer_key(
    lic: CheckedLicense, predicate: Mapping[str, Any], given: Ed25519PublicKey | None
) -> Ed25519PublicKey:
    """The key the report must be signed by: the install key a bound license names (a
    `given` key must be that one), else the `given` key (a floating license binds none)."""
    b = lic.claims.binding
    if b.mode == "floating":
        if given is None:
            raise UsageError(
                f"license {lic.claims.license_id} is floating: it names no install key; "
                "pass the signing install's public key"
            )
        return given
    if b.install_public_key:
        bound = decode_public(b.install_public_key, "license binding.install_public_key")
    else:
        bound = decode_public(predicate.get("signer", {}).get("public_key"), "predicate.signer")
    if key_id(bound) != b.install_keyid:
        raise IntegrityError(
            f"predicate.signer: key {key_id(bound)} is not install {b.install_keyid}, "
            f"which license {lic.claims.license_id} is bound to"
        )
    if given is not None and key_id(given) != b.install_keyid:
        raise IntegrityError(
            f"the key given ({key_id(given)}) is not install {b.install_keyid}, which "
            f"license {lic.claims.license_id} is bound to"
        )
    return bound


def check_terms(lic: CheckedLicense, predicate: Mapping[str, Any]) -> None:
    """The report names this license and carries exactly the terms it yields."""
    ref = predicate.get("license")
    if not isinstance(ref, dict):
        raise IntegrityError("predicate.license: the report names no license")
    if ref.get("id") != lic.claims.license_id:
        raise IntegrityError(
            f"predicate.license.id is {ref.get('id')!r}, the license is {lic.claims.license_id!r}"
        )
    if ref.get("sha256") != lic.digest:
        raise IntegrityError(
            f"predicate.license.sha256 {str(ref.get('sha256'))[:16]}... is not the license "
            f"file's ({lic.digest[:16]}...)"
        )
    pricing = predicate.get("pricing")
    if not isinstance(pricing, dict):
        raise IntegrityError("predicate.pricing: the report carries no terms")
    manifest = predicate.get("candidate", {}).get("manifest", {})
    kind = manifest.get("target", {}).get("kind") if isinstance(manifest, dict) else None
    if pricing.get("device_class") != kind:
        raise IntegrityError(
            f"predicate.pricing.device_class is {pricing.get('device_class')!r}, the artifact "
            f"was compiled for {kind!r}"
        )
    override = pricing.get("price_per_hour") if pricing.get("source") == COMMAND_LINE else None
    try:
        want = license_terms(
            lic.claims,
            evaluation=lic.evaluation,
            sha256=lic.digest,
            device_class=str(kind),
            price_per_hour=override,
        ).pricing_json()
    except UsageError:
        raise IntegrityError(
            f"predicate.pricing.source is {COMMAND_LINE}, which production license "
            f"{lic.claims.license_id} does not allow"
        ) from None
    for field, value in want.items():
        if pricing.get(field) != value:
            raise IntegrityError(
                f"predicate.pricing.{field} is {pricing.get(field)!r} in the report, "
                f"{value!r} in license {lic.claims.license_id}"
            )
    if set(pricing) != set(want):
        raise IntegrityError(f"predicate.pricing has fields {sorted(pricing)}, not {sorted(want)}")
    b = lic.claims.binding
    fingerprint = predicate.get("machine", {}).get("fingerprint")
    if b.mode == "install" and fingerprint != b.fingerprint:
        raise IntegrityError(
            f"predicate.machine.fingerprint is {fingerprint!r}, license "
            f"{lic.claims.license_id} is bound to machine {b.fingerprint}"
        )


def check_subjects(statement: Mapping[str, Any]) -> dict[str, str]:
    """Each subject is a digest the predicate records (name -> sha256 returned)."""
    p = statement["predicate"]
    subjects = {s.get("name"): s.get("digest", {}).get("sha256") for s in statement["subject"]}
    artifacts = p.get("candidate", {}).get("artifact_digests", [])
    recorded = [a.get("sha256") for a in artifacts if isinstance(a, dict)]
    if not recorded or len(recorded) != len(artifacts):
        raise IntegrityError("predicate.candidate.artifact_digests: no digests are recorded")
    named = [d for n, d in subjects.items() if str(n).startswith("artifact:")]
    if sorted(named) != sorted(recorded):
        raise IntegrityError(
            "the artifact subjects are not the artifacts predicate.candidate.artifact_digests records"
        )
    models = [d for n, d in subjects.items() if str(n).startswith("baseline-model:")]
    if models != [p.get("baseline", {}).get("model_sha256")]:
        raise IntegrityError("the baseline-model subject is not predicate.baseline.model_sha256")
    options = [d for n, d in subjects.items() if str(n).startswith("baseline-options:")]
    recorded_options = (p["baseline"].get("options_file") or {}).get("sha256")
    if (options or recorded_options) and options != [recorded_options]:
        raise IntegrityError(
            "the baseline-options subject is not predicate.baseline.options_file.sha256"
        )
    if subjects.get("inputs") != p.get("inputs", {}).get("sha256"):
        raise IntegrityError("the inputs subject differs from predicate.inputs.sha256")
    files = [d for n, d in subjects.items() if str(n).startswith("inputs-file:")]
    if files and files != [p.get("inputs", {}).get("file_sha256")]:
        raise IntegrityError("the inputs-file subject differs from predicate.inputs.file_sha256")
    return {str(n): str(d) for n, d in subjects.items()}


def check_files(
    predicate: Mapping[str, Any],
    *,
    artifact: Path | None = None,
    model: Path | None = None,
    inputs: Path | None = None,
    baseline_options: Path | None = None,
) -> None:
    """Re-hash the files the customer says were measured against what the report records."""
    from luminal.metering.bench.run import file_sha256

    baseline = predicate.get("baseline", {})
    # (flag, file given, the digests the report allows for it, what the report calls it)
    checks: tuple[tuple[str, Path | None, list[Any], str], ...] = (
        (
            "artifact",
            artifact,
            [a.get("sha256") for a in predicate.get("candidate", {}).get("artifact_digests", [])],
            "an artifact the report measured",
        ),
        (
            "model",
            model,
            [baseline.get("model_sha256")],
            "the baseline model the report measured (predicate.baseline.model_sha256)",
        ),
        (
            "baseline-options",
            baseline_options,
            [(baseline.get("options_file") or {}).get("sha256")],
            "the options file the report's baseline ran with",
        ),
        (
            "inputs",
            inputs,
            [predicate.get("inputs", {}).get("file_sha256")],
            "the inputs file the report measured (predicate.inputs.file_sha256)",
        ),
    )
    for flag, path, allowed, what in checks:
        if path is None:
            continue
        if not path.is_file():
            raise UsageError(f"--{flag} {path}: no such file")
        got = file_sha256(path)
        if got not in allowed:
            raise IntegrityError(f"--{flag} {path} (sha256 {got[:16]}...) is not {what}")
