"""Issuing licenses: a licensee's terms, a vendor signing key, and a binding -> signed license.

A signing key `PREFIX.key` is production once the root has certified it: `luminal-vendor
certify` writes `PREFIX.cert.json` beside it, and every license (and clock reset token) the
key signs carries that certificate, so installs verify it against the roots they ship.  A
key without a certificate can only sign for installs that trust it locally, as an
evaluation key.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from luminal.errors import LicenseInvalid, UsageError
from luminal.licensing import dsse
from luminal.licensing.chain import parse_certificate
from luminal.licensing.clockreset import TOKEN_TYPE, ResetRequest, token_payload
from luminal.licensing.keys import TrustedKey, key_id, load_private
from luminal.licensing.license import (
    Binding,
    Entitlements,
    LicenseClaims,
    Licensee,
    Metering,
    Pricing,
    certificate_text,
)
from luminal.licensing.request import ActivationRequest
from luminal.licensing.timeutil import utcnow

#: A license is valid from a day before it is signed, so a customer clock a little behind
#: the vendor's does not see a brand-new license as not yet valid.
SKEW_ALLOWANCE = timedelta(days=1)


@dataclass(frozen=True)
class Terms:
    """What a licensee bought: everything in a license except ids, dates and binding."""

    licensee: Licensee
    entitlements: Entitlements
    pricing: Pricing
    metering: Metering = field(default_factory=Metering)
    days: int = 365
    grace_days: int = 14
    evaluation: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "licensee": self.licensee.to_json(),
            "days": self.days,
            "grace_days": self.grace_days,
            "evaluation": self.evaluation,
            "entitlements": self.entitlements.to_json(),
            "pricing": self.pricing.to_json(),
            "metering": self.metering.to_json(),
        }

    @classmethod
    def from_json(cls, data: object, where: str = "terms") -> Terms:
        if not isinstance(data, dict):
            raise LicenseInvalid(f"{where}: expected a JSON object")
        try:
            return cls(
                licensee=Licensee.from_json(data.get("licensee")),
                entitlements=Entitlements.from_json(data.get("entitlements")),
                pricing=Pricing.from_json(data.get("pricing")),
                metering=Metering.from_json(data.get("metering", {})),
                days=int(data.get("days", 365)),
                grace_days=int(data.get("grace_days", 14)),
                evaluation=bool(data.get("evaluation", False)),
            )
        except LicenseInvalid as err:
            raise LicenseInvalid(f"{where}: {err}") from None
        except (TypeError, ValueError) as err:
            raise LicenseInvalid(f"{where}: malformed ({err})") from None

    @classmethod
    def load(cls, path: Path) -> Terms:
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise UsageError(f"terms {path}: no such file") from None
        except (OSError, ValueError) as err:
            raise UsageError(f"terms {path}: not JSON ({err})") from None
        return cls.from_json(data, f"terms {path}")


def certificate_path(key_path: Path) -> Path:
    """Where a signing key's root certificate lives: `PREFIX.cert.json` beside `PREFIX.key`."""
    key_path = Path(key_path)
    stem = key_path.name[: -len(".key")] if key_path.name.endswith(".key") else key_path.name
    return key_path.with_name(f"{stem}.cert.json")


@dataclass(frozen=True)
class Signer:
    """The vendor's license-signing key, and its root certificate (JSON text, "" if none)."""

    private_key: Ed25519PrivateKey
    certificate: str = ""

    @property
    def keyid(self) -> str:
        return key_id(self.private_key.public_key())

    @classmethod
    def load(cls, path: Path) -> Signer:
        """The key at `path` and, if present, its certificate beside it (which must match)."""
        key = load_private(path)
        cert_file = certificate_path(path)
        try:
            data = json.loads(cert_file.read_text())
        except FileNotFoundError:
            return cls(key)
        except (OSError, ValueError) as err:
            raise UsageError(f"certificate {cert_file}: not JSON ({err})") from None
        _, cert = parse_certificate(data)
        if cert.keyid != key_id(key.public_key()):
            raise UsageError(f"certificate {cert_file} is for key {cert.keyid}, not {path}")
        return cls(key, certificate_text(data))

    def public(self, **window: object) -> TrustedKey:
        return TrustedKey(self.keyid, self.private_key.public_key(), **window)  # type: ignore[arg-type]

    def sign(self, payload_type: str, payload: bytes) -> dsse.Envelope:
        return dsse.sign(payload_type, payload, {self.keyid: self.private_key})


def bind_to(request: ActivationRequest) -> Binding:
    return Binding(
        mode="install",
        install_keyid=request.install_keyid,
        install_public_key=request.install_public_key,
        fingerprint=request.fingerprint,
    )


def new_license_id(now: datetime) -> str:
    return f"LIC-{now:%Y%m%d}-{secrets.token_hex(4).upper()}"


def issue(
    terms: Terms,
    signer: Signer,
    binding: Binding,
    *,
    now: datetime | None = None,
    not_before: datetime | None = None,
    expires_at: datetime | None = None,
    license_id: str | None = None,
) -> tuple[LicenseClaims, dsse.Envelope]:
    """Claims from `terms` and `binding`, signed by `signer`; dates default from `terms.days`."""
    now = now or utcnow()
    not_before = not_before or now - SKEW_ALLOWANCE
    claims = LicenseClaims(
        license_id=license_id or new_license_id(now),
        licensee=terms.licensee,
        issued_at=now,
        not_before=not_before,
        expires_at=expires_at or now + timedelta(days=terms.days),
        grace_days=terms.grace_days,
        entitlements=terms.entitlements,
        pricing=terms.pricing,
        binding=binding,
        metering=terms.metering,
        evaluation=terms.evaluation,
        signer_certificate=signer.certificate,
    )
    return claims, signer.sign(dsse.LICENSE_TYPE, claims.payload())


def clock_reset_token(
    request: ResetRequest, signer: Signer, now: datetime | None = None
) -> dsse.Envelope:
    """The vendor's answer to a clock reset request: this install, its nonce, the vendor's time."""
    payload = token_payload(request, now or utcnow(), signer.certificate)
    return signer.sign(TOKEN_TYPE, payload)
