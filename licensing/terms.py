"""Billing terms of a report: read from the vendor-signed license, never chosen by a report.

    license file (DSSE, vendor-signed)          report predicate
      license_id, sha256(envelope bytes)  --->  "license": {"id", "sha256"}
      pricing.share, currency             --->  "pricing": {"share", "currency",
      price_book[device class]                               "price_per_hour", "device_class",
      evaluation? (or a locally trusted key)                 "source", "terms"}

`license_terms` is the one function that makes them: `luminal bench` calls it to write a
report, and `report verify` (and `luminal-vendor verify-report`) call it again on the
license and compare field by field, so a report whose share, price, currency or kind was
edited (and re-signed) differs from what its license says.

A price from the command line (`--price-per-hour`) is an evaluation convenience: only an
evaluation license allows it, and the terms are then `evaluation`, never billable.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from luminal.errors import UsageError
from luminal.licensing.license import LicenseClaims
from luminal.licensing.pricing import to_decimal

#: `source` of a price given on the command line instead of the license's price book.
COMMAND_LINE = "--price-per-hour"


class TermsKind(Enum):
    """Whether the vendor bills on these terms."""

    PRODUCTION = "production"  # a root-certified key signed a non-evaluation license
    EVALUATION = "evaluation"  # an evaluation license, a locally trusted key, or a CLI price


@dataclass(frozen=True)
class LicenseRef:
    """Which license a report's terms come from: its id and the SHA-256 of the file."""

    license_id: str
    sha256: str

    def to_json(self) -> dict[str, str]:
        return {"id": self.license_id, "sha256": self.sha256}


@dataclass(frozen=True)
class BillingTerms:
    license: LicenseRef
    share: str
    currency: str
    device_class: str
    price_per_hour: str | None  # None: the license has no price for this device class
    source: str  # "license ID" or COMMAND_LINE
    kind: TermsKind

    @property
    def billable(self) -> bool:
        return self.kind is TermsKind.PRODUCTION and self.price_per_hour is not None

    def pricing_json(self) -> dict[str, str | None]:
        """The report's `pricing` (what `results.savings` computes from)."""
        return {
            "price_per_hour": self.price_per_hour,
            "share": self.share,
            "currency": self.currency,
            "device_class": self.device_class,
            "source": self.source,
            "terms": self.kind.value,
        }


def license_terms(
    claims: LicenseClaims,
    *,
    evaluation: bool,
    sha256: str,
    device_class: str,
    price_per_hour: str | None = None,
) -> BillingTerms:
    """The terms a report made under this license carries.

    `evaluation` is the license status's (an evaluation license, or any license of a
    locally trusted key).  `price_per_hour` (the command line's) is refused with a
    production license: a customer may not choose the price the vendor bills on.
    """
    p = claims.pricing
    ref = LicenseRef(claims.license_id, sha256)
    if price_per_hour is not None:
        if not evaluation:
            raise UsageError(
                f"--price-per-hour is only for evaluation licenses: license "
                f"{claims.license_id} is a production license, whose price book sets the price"
            )
        price = str(to_decimal(price_per_hour, COMMAND_LINE))
        return BillingTerms(
            ref, p.share, p.currency, device_class, price, COMMAND_LINE, TermsKind.EVALUATION
        )
    book = p.price(device_class)
    return BillingTerms(
        ref,
        p.share,
        p.currency,
        device_class,
        str(book) if book is not None else None,
        f"license {claims.license_id}",
        TermsKind.EVALUATION if evaluation else TermsKind.PRODUCTION,
    )
