"""Enforcement: is this install licensed for this feature on this target, right now?

`check()` runs before licensed work (compile, bench, report, meter) and either returns a
`LicenseStatus` (possibly with warnings, e.g. inside the grace period) or raises the
`LicenseError` that says exactly what is wrong.  The order of the checks is fixed:

1. a license is installed                         LicenseMissing
2. it is a well-formed signed envelope            LicenseInvalid
3. its signer is not revoked                      KeyRevoked
4. the signature verifies with a key that is      SignatureInvalid
   root-certified (its certificate travels in the
   license or the local trust file) or locally
   trusted for evaluation
5. the key's window covers the issue time         SignatureInvalid
6. a locally trusted key signed evaluation terms  SignatureInvalid
   (then held to `evaluation`'s bounds)
7. the clock has not been set back                ClockRollback
8. the key had not retired when this install      SignatureInvalid
   first saw the license (`check_retirement`)
9. now is inside [not_before, expiry + grace]     LicenseNotYetValid / LicenseExpired
10. the binding names this install, and this      WrongInstall
    machine (recomputed now) is the bound one
11. the feature, target and device count          NotEntitled

Running compiled artifacts never call this: licensing stops compiling and billing
features, never a customer's inference.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

from luminal.errors import (
    IntegrityError,
    KeyRevoked,
    LicenseError,
    LicenseExpired,
    LicenseInvalid,
    LicenseMissing,
    LicenseNotYetValid,
    NotEntitled,
    SignatureInvalid,
    WrongInstall,
)
from luminal.licensing import clock, dsse, evaluation
from luminal.licensing.chain import verify_certificate
from luminal.licensing.home import Home
from luminal.licensing.identity import InstallIdentity, differences, load_or_create, machine_facts
from luminal.licensing.keys import Keyring, TrustedKey, load_keyring
from luminal.licensing.license import LicenseClaims
from luminal.licensing.timeutil import aware, day, to_iso

#: A valid license this close to expiry carries a warning.
EXPIRY_WARNING = timedelta(days=14)


@dataclass(frozen=True)
class LicenseStatus:
    """A license that passed every check, and what the user should hear about it."""

    claims: LicenseClaims
    signer: TrustedKey
    state: str  # "valid" or "grace"
    checked_at: datetime
    warnings: tuple[str, ...] = ()
    #: SHA-256 of the license file's bytes (the envelope), as reports name their license.
    digest: str = ""

    @property
    def production_key(self) -> bool:
        return self.signer.production

    @property
    def evaluation(self) -> bool:
        """Evaluation terms: an evaluation license, or any license of a locally trusted key."""
        return self.claims.evaluation or not self.signer.production

    def to_json(self) -> dict[str, object]:
        return {
            "state": self.state,
            "checked_at": to_iso(self.checked_at),
            "signer": {
                "keyid": self.signer.keyid,
                "production": self.signer.production,
                "certified_by": self.signer.certified_by or None,
            },
            "evaluation": self.evaluation,
            "terms": evaluation.TERMS_NOTE if self.evaluation else "production",
            "warnings": list(self.warnings),
            "license": self.claims.to_json(),
        }


def verify_license(raw: bytes, keyring: Keyring, where: str) -> tuple[LicenseClaims, TrustedKey]:
    """Claims of a signed license (bytes of the envelope file) and the key that signed it.

    The claims are the enforced ones: a locally trusted (evaluation) key's are cut to the
    evaluation bounds, and its non-evaluation claims are refused.
    """
    try:
        envelope = dsse.Envelope.loads(raw)
    except IntegrityError as err:
        raise LicenseInvalid(f"license {where}: {err}") from None
    if envelope.payload_type != dsse.LICENSE_TYPE:
        raise LicenseInvalid(
            f"license {where}: payload type is {envelope.payload_type!r}, not a luminal license"
        )
    for s in envelope.signatures:
        revoked = keyring.revocation(s.keyid)
        if revoked is not None:
            since = f" on {revoked.revoked_at}" if revoked.revoked_at else ""
            why = f": {revoked.reason}" if revoked.reason else ""
            raise KeyRevoked(
                f"license {where}: signing key {s.keyid} was revoked{since}{why}; "
                "ask the vendor for a license signed with a current key"
            )
    keyring, readable = _with_embedded_certificate(envelope, keyring)
    try:
        keyid = dsse.verify(envelope, keyring.public_keys())
    except IntegrityError as err:
        hint = "" if readable else " (its payload does not parse: changed after signing?)"
        raise SignatureInvalid(f"license {where}: signature invalid: {err}{hint}") from None
    try:
        claims = LicenseClaims.from_json(envelope.payload_json())
    except IntegrityError as err:
        raise LicenseInvalid(f"license {where}: {err}") from None
    signer = keyring.get(keyid)
    assert signer is not None
    if not signer.valid_at(claims.issued_at):
        raise SignatureInvalid(
            f"license {where}: signing key {keyid} was not valid on the issue date "
            f"{to_iso(claims.issued_at)} (key valid {signer.window()})"
        )
    return evaluation.bound(claims, signer, f" ({where})" if where else ""), signer


def _with_embedded_certificate(envelope: dsse.Envelope, keyring: Keyring) -> tuple[Keyring, bool]:
    """`keyring` plus the signer the license's own certificate vouches for, if it verifies;
    and whether the payload parsed at all.

    The certificate is read before the license's signature is checked (it says which key
    to check it with); it is trusted only because a shipped root signed it.
    """
    try:
        data = json.loads(envelope.payload)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return keyring, False
    cert = data.get("signer_certificate") if isinstance(data, dict) else None
    if cert is None:
        return keyring, True
    try:
        key = verify_certificate(cert, keyring)
    except LicenseError:
        return keyring, True
    if keyring.revocation(key.keyid) is not None:
        return keyring, True
    return keyring.merged(Keyring((key,)), prefer_other=True), True


def file_digest(raw: bytes) -> str:
    """What a report names its license by: SHA-256 of the license file's bytes."""
    return hashlib.sha256(raw).hexdigest()


def claims_digest(claims: LicenseClaims) -> str:
    return hashlib.sha256(claims.payload()).hexdigest()


def check_retirement(claims: LicenseClaims, signer: TrustedKey, home: Home, now: datetime) -> None:
    """Refuse a license this install first saw after its signing key's window had ended.

    The key's window is checked against the license's `issued_at`, but `issued_at` is
    written by whoever signs: a retired (or leaked) key can sign a new license dated back
    into its window.  What the signer cannot write is *when this install first saw the
    license*: the install's own clock record (`clock.first_seen`, kept with the rollback
    guard, so it cannot be moved back either).  The rule:

        a license is accepted only if first_seen < the signing key's not_after

    So a license installed while its key was current keeps working after the key retires
    (rotation never strands a customer), while one that arrives after retirement is
    refused however it is dated.  A vendor therefore stops issuing with a key some time
    before its certificate ends (licenses are delivered within days), and a customer whose
    license arrives late asks for one from the current key.
    """
    if signer.not_after is None:
        return
    last = clock.read(home).last_seen
    seen = clock.first_seen(home, claims_digest(claims), max(now, last) if last else now)
    if seen >= signer.not_after:
        raise SignatureInvalid(
            f"license {claims.license_id}: its signing key {signer.keyid} retired on "
            f"{to_iso(signer.not_after)}, and this install first saw the license on "
            f"{to_iso(seen)}: a retired key cannot sign a license that installs, however "
            "its issue date reads; ask the vendor for a license signed by a current key"
        )


def check_window(claims: LicenseClaims, now: datetime) -> tuple[str, tuple[str, ...]]:
    """("valid" | "grace", warnings), or LicenseNotYetValid / LicenseExpired."""
    lid = claims.license_id
    if now < claims.not_before:
        raise LicenseNotYetValid(
            f"license {lid} is not yet valid: valid from {to_iso(claims.not_before)}, "
            f"the clock reads {to_iso(now)}"
        )
    if now >= claims.grace_ends:
        raise LicenseExpired(
            f"license {lid} expired on {day(claims.expires_at)} and its "
            f"{claims.grace_days}-day grace period ended on {day(claims.grace_ends)}; "
            "install a renewed license"
        )
    if now >= claims.expires_at:
        left = (claims.grace_ends - now).days
        return "grace", (
            f"license {lid} expired on {day(claims.expires_at)}; grace period ends on "
            f"{day(claims.grace_ends)} ({left} days left): renew now",
        )
    if claims.expires_at - now <= EXPIRY_WARNING:
        return "valid", (
            f"license {lid} expires on {day(claims.expires_at)} "
            f"({(claims.expires_at - now).days} days left)",
        )
    return "valid", ()


def check_binding(claims: LicenseClaims, identity: InstallIdentity) -> None:
    """A bound license names this install's key, and this machine, recomputed now."""
    b = claims.binding
    if b.mode == "floating":
        return
    if b.install_keyid != identity.keyid or b.fingerprint != identity.fingerprint:
        raise WrongInstall(
            f"license {claims.license_id} is for another install: it is bound to install key "
            f"{b.install_keyid} (fingerprint {b.fingerprint}), this install is "
            f"{identity.keyid} (fingerprint {identity.fingerprint}); "
            "request a license for this install with `luminal license request`"
        )
    current = machine_facts()
    if current.fingerprint != b.fingerprint:
        what = "; ".join(differences(identity.machine, current))
        raise WrongInstall(
            f"license {claims.license_id} is bound to the machine with fingerprint "
            f"{b.fingerprint}, but this machine is {current.fingerprint}: {what}; "
            "was this LUMINAL_HOME copied from another machine? request a license for this "
            "machine with `luminal license request`"
        )


def check_entitlements(
    claims: LicenseClaims, feature: str | None, target: str | None, devices: int | None
) -> None:
    e, lid = claims.entitlements, claims.license_id
    if feature is not None and feature not in e.features:
        raise NotEntitled(
            f"license {lid} does not include feature '{feature}' "
            f"(licensed features: {', '.join(e.features) or 'none'})"
        )
    if target is not None and not target_entitled(target, e.targets):
        raise NotEntitled(
            f"license {lid} does not entitle target '{target}' "
            f"(entitled targets: {', '.join(e.targets) or 'none'})"
        )
    if devices is not None and devices > e.devices:
        raise NotEntitled(f"license {lid} allows {e.devices} device(s); {devices} requested")


def target_entitled(target: str, targets: tuple[str, ...]) -> bool:
    """`asic` entitles every `asic:NAME` plugin; otherwise names match exactly."""
    family = target.split(":", 1)[0]
    return target in targets or (family != target and family in targets)


def check(
    feature: str | None = None,
    target: str | None = None,
    now: datetime | None = None,
    *,
    devices: int | None = None,
    home: Home | None = None,
    keyring: Keyring | None = None,
    license_path: Path | None = None,
) -> LicenseStatus:
    """Verify the installed license for `feature` on `target`; raise the LicenseError if not.

    `now`, `home` and `keyring` are injectable (tests; a vendor checking a file); by default
    the system clock, `$LUMINAL_HOME` and the shipped keyring plus local trust are used.
    """
    home = home or Home.resolve()
    keyring = keyring if keyring is not None else load_keyring(home.trusted_keys)
    path = license_path or home.license
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise LicenseMissing(
            f"no license installed in {home.root}: run `luminal license request` and "
            "`luminal license install FILE` (air-gapped) or `luminal license activate`"
        ) from None
    claims, signer = verify_license(raw, keyring, str(path))
    status = evaluate(
        claims, signer, now, feature=feature, target=target, devices=devices, home=home
    )
    return replace(status, digest=file_digest(raw))


def evaluate(
    claims: LicenseClaims,
    signer: TrustedKey,
    now: datetime | None,
    *,
    home: Home,
    feature: str | None = None,
    target: str | None = None,
    devices: int | None = None,
) -> LicenseStatus:
    """Steps 7-11 on verified claims (also used by `install` before it writes the file)."""
    now = clock.observe(home, aware(now) if now is not None else None)
    check_retirement(claims, signer, home, now)
    state, warnings = check_window(claims, now)
    check_binding(claims, load_or_create(home))
    check_entitlements(claims, feature, target, devices)
    return LicenseStatus(claims, signer, state, now, warnings)
