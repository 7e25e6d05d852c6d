"""What a license says: frozen dataclasses with a JSON form (the signed payload).

A license file is a DSSE envelope (`dsse.LICENSE_TYPE`) whose payload is
`LicenseClaims.to_json()`; see docs/licensing.md for every field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from luminal.errors import LicenseInvalid, LuminalError
from luminal.licensing.pricing import check_share, to_decimal
from luminal.licensing.timeutil import from_iso, to_iso

SCHEMA = "luminal.license/v1"
FEATURES = ("compile", "bench", "report", "meter")
BILLING_BASIS = "speedup_lower_confidence_bound"
#: Longer grace would be a second expiry date nobody reviews (and overflows datetimes).
MAX_GRACE_DAYS = 365
_TARGET = re.compile(r"^[a-z0-9][a-z0-9_.-]*(:[a-z0-9][a-z0-9_.-]*)?$")


def _obj(data: object, where: str) -> dict[str, object]:
    if not isinstance(data, dict):
        raise LicenseInvalid(f"{where}: expected an object")
    return data


def _get(data: dict[str, object], key: str, where: str, kind: type | tuple[type, ...]) -> object:
    if key not in data:
        raise LicenseInvalid(f"{where}.{key}: missing")
    value = data[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise LicenseInvalid(f"{where}.{key}: expected {getattr(kind, '__name__', kind)}")
    return value


@dataclass(frozen=True)
class Licensee:
    id: str
    name: str

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "name": self.name}

    @classmethod
    def from_json(cls, data: object, where: str = "licensee") -> Licensee:
        d = _obj(data, where)
        return cls(str(_get(d, "id", where, str)), str(d.get("name", d["id"])))


@dataclass(frozen=True)
class Entitlements:
    """Targets (cpu, cuda, rocm, an ASIC plugin as `asic:NAME`), device count, features."""

    targets: tuple[str, ...]
    devices: int
    features: tuple[str, ...]

    def __post_init__(self) -> None:
        for t in self.targets:
            if not _TARGET.match(t):
                raise LicenseInvalid(f"entitlements.targets: bad target name {t!r}")
        for f in self.features:
            if f not in FEATURES:
                raise LicenseInvalid(f"entitlements.features: unknown feature {f!r}")
        if self.devices < 1:
            raise LicenseInvalid(f"entitlements.devices: must be >= 1, got {self.devices}")

    def to_json(self) -> dict[str, object]:
        return {
            "targets": list(self.targets),
            "devices": self.devices,
            "features": list(self.features),
        }

    @classmethod
    def from_json(cls, data: object, where: str = "entitlements") -> Entitlements:
        d = _obj(data, where)
        return cls(
            targets=tuple(str(t) for t in _get(d, "targets", where, list)),  # type: ignore[union-attr]
            devices=int(_get(d, "devices", where, int)),  # type: ignore[arg-type]
            features=tuple(str(f) for f in _get(d, "features", where, list)),  # type: ignore[union-attr]
        )


@dataclass(frozen=True)
class Pricing:
    """Share of savings, currency, $/device-hour per device class, billing basis."""

    share: str
    currency: str
    price_book: tuple[tuple[str, Decimal], ...]
    basis: str = BILLING_BASIS
    confidence: str = "0.95"

    def __post_init__(self) -> None:
        try:
            check_share(to_decimal(self.share, "pricing.share"))
            for cls_name, price in self.price_book:
                if price < 0:
                    raise LicenseInvalid(f"pricing.price_book.{cls_name}: negative price")
        except LuminalError as err:
            raise LicenseInvalid(str(err)) from None
        if self.basis != BILLING_BASIS:
            raise LicenseInvalid(f"pricing.basis: only {BILLING_BASIS!r} is supported")

    @property
    def share_value(self) -> Decimal:
        return to_decimal(self.share, "pricing.share")

    def price(self, device_class: str) -> Decimal | None:
        return dict(self.price_book).get(device_class)

    def to_json(self) -> dict[str, object]:
        return {
            "share": self.share,
            "currency": self.currency,
            "price_book": {k: str(v) for k, v in self.price_book},
            "basis": self.basis,
            "confidence": self.confidence,
        }

    @classmethod
    def from_json(cls, data: object, where: str = "pricing") -> Pricing:
        d = _obj(data, where)
        book = _obj(d.get("price_book", {}), f"{where}.price_book")
        try:
            prices = tuple(
                (str(k), to_decimal(str(v), f"{where}.price_book.{k}")) for k, v in book.items()
            )
        except LuminalError as err:
            raise LicenseInvalid(str(err)) from None
        return cls(
            share=str(_get(d, "share", where, (str, int))),
            currency=str(_get(d, "currency", where, str)),
            price_book=prices,
            basis=str(d.get("basis", BILLING_BASIS)),
            confidence=str(d.get("confidence", "0.95")),
        )


@dataclass(frozen=True)
class Binding:
    """`install`: only the install with this key (and fingerprint) may use the license."""

    mode: str  # "install" or "floating"
    install_keyid: str = ""
    install_public_key: str = ""
    fingerprint: str = ""

    def __post_init__(self) -> None:
        if self.mode not in ("install", "floating"):
            raise LicenseInvalid(f"binding.mode: expected install or floating, got {self.mode!r}")
        if self.mode == "install" and not (self.install_keyid and self.fingerprint):
            raise LicenseInvalid("binding: an install binding needs install_keyid and fingerprint")

    def to_json(self) -> dict[str, object]:
        if self.mode == "floating":
            return {"mode": "floating"}
        return {
            "mode": "install",
            "install_keyid": self.install_keyid,
            "install_public_key": self.install_public_key,
            "fingerprint": self.fingerprint,
        }

    @classmethod
    def from_json(cls, data: object, where: str = "binding") -> Binding:
        d = _obj(data, where)
        return cls(
            mode=str(d.get("mode", "")),
            install_keyid=str(d.get("install_keyid", "")),
            install_public_key=str(d.get("install_public_key", "")),
            fingerprint=str(d.get("fingerprint", "")),
        )


@dataclass(frozen=True)
class Metering:
    """How usage leaves the site: `offline` (signed export files) or `online` (uploads)."""

    mode: str = "offline"
    export_interval_days: int = 30
    endpoint: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("online", "offline"):
            raise LicenseInvalid(f"metering.mode: expected online or offline, got {self.mode!r}")
        if self.export_interval_days < 1:
            raise LicenseInvalid("metering.export_interval_days: must be >= 1")
        if self.mode == "online" and not self.endpoint:
            raise LicenseInvalid("metering.endpoint: required when metering is online")

    def to_json(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "export_interval_days": self.export_interval_days,
            "endpoint": self.endpoint,
        }

    @classmethod
    def from_json(cls, data: object, where: str = "metering") -> Metering:
        d = _obj(data, where)
        endpoint = d.get("endpoint")
        return cls(
            mode=str(d.get("mode", "offline")),
            export_interval_days=int(d.get("export_interval_days", 30)),  # type: ignore[arg-type]
            endpoint=str(endpoint) if endpoint else None,
        )


@dataclass(frozen=True)
class LicenseClaims:
    license_id: str
    licensee: Licensee
    issued_at: datetime
    not_before: datetime
    expires_at: datetime
    grace_days: int
    entitlements: Entitlements
    pricing: Pricing
    binding: Binding
    metering: Metering
    evaluation: bool = False
    #: The root certificate of the signing key (DSSE envelope as JSON text), "" if none:
    #: it travels with the license so an install needs no separate trust step.
    signer_certificate: str = ""

    def __post_init__(self) -> None:
        if self.expires_at <= self.not_before:
            raise LicenseInvalid(f"license {self.license_id}: expires_at is not after not_before")
        if not 0 <= self.grace_days <= MAX_GRACE_DAYS:
            raise LicenseInvalid(
                f"license {self.license_id}: grace_days must be in 0..{MAX_GRACE_DAYS}"
            )

    @property
    def grace_ends(self) -> datetime:
        return self.expires_at + timedelta(days=self.grace_days)

    def to_json(self) -> dict[str, object]:
        cert: dict[str, object] = (
            {"signer_certificate": json.loads(self.signer_certificate)}
            if self.signer_certificate
            else {}
        )
        return {
            **cert,
            "schema": SCHEMA,
            "license_id": self.license_id,
            "licensee": self.licensee.to_json(),
            "issued_at": to_iso(self.issued_at),
            "not_before": to_iso(self.not_before),
            "expires_at": to_iso(self.expires_at),
            "grace_days": self.grace_days,
            "evaluation": self.evaluation,
            "entitlements": self.entitlements.to_json(),
            "pricing": self.pricing.to_json(),
            "binding": self.binding.to_json(),
            "metering": self.metering.to_json(),
        }

    def payload(self) -> bytes:
        return json.dumps(self.to_json(), indent=2, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: object) -> LicenseClaims:
        d = _obj(data, "license")
        if d.get("schema") != SCHEMA:
            raise LicenseInvalid(f"license.schema: expected {SCHEMA!r}, got {d.get('schema')!r}")
        try:
            return cls(
                license_id=str(_get(d, "license_id", "license", str)),
                licensee=Licensee.from_json(d.get("licensee")),
                issued_at=from_iso(d.get("issued_at"), "license.issued_at"),
                not_before=from_iso(d.get("not_before"), "license.not_before"),
                expires_at=from_iso(d.get("expires_at"), "license.expires_at"),
                grace_days=int(_get(d, "grace_days", "license", int)),  # type: ignore[arg-type]
                entitlements=Entitlements.from_json(d.get("entitlements")),
                pricing=Pricing.from_json(d.get("pricing")),
                binding=Binding.from_json(d.get("binding")),
                metering=Metering.from_json(d.get("metering", {})),
                evaluation=bool(d.get("evaluation", False)),
                signer_certificate=certificate_text(d.get("signer_certificate")),
            )
        except (TypeError, ValueError, OverflowError) as err:
            raise LicenseInvalid(f"license: malformed field ({err})") from None


def certificate_text(data: object) -> str:
    """The embedded certificate as canonical JSON text ("" when absent)."""
    if data is None:
        return ""
    if not isinstance(data, dict):
        raise LicenseInvalid("license.signer_certificate: expected a DSSE envelope object")
    return json.dumps(data, sort_keys=True)
