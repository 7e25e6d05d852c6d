"""Licensing: signed license files, activation (offline and online), entitlements, pricing.

The pieces, one idea a module::

    dsse        the signed-envelope format (licenses, requests, reports, usage)
    keys        Ed25519 keys, key ids, the vendor keyring (shipped + local trust)
    identity    this install's key pair and machine fingerprint
    license     LicenseClaims and its parts (frozen dataclasses <-> JSON)
    clock       last-seen time and clock-rollback detection
    enforce     check(feature, target) -> LicenseStatus, or the LicenseError that says why
    request     activation requests signed by the install key
    activation  installing a license file; online activation over HTTPS
    status      what `luminal license show` prints
    pricing     value-based pricing in Decimal
    terms       a report's billing terms, read from the license (never from a report)

Licensing never stops a running compiled model: only compiling and billing features check.

The vendor's side (signing licenses, the activation service, `luminal-vendor`) is its own
distribution, `luminal-vendor` in the repository's `vendor/`, never installed on a customer's
machine: this package only verifies what the vendor signed.
"""

from luminal.licensing.enforce import LicenseStatus, check
from luminal.licensing.license import LicenseClaims
from luminal.licensing.pricing import Quote, quote

__all__ = ["LicenseClaims", "LicenseStatus", "Quote", "check", "quote"]
