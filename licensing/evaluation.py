"""Evaluation terms: what a key trusted only by local setting may ever yield.

Anyone can make a key and trust it with `luminal license trust KEY --evaluation`, so the
licenses such a key signs are worth exactly what an evaluation is worth:

- a license that says it is *not* an evaluation is refused (it would be self-issued
  production terms);
- an evaluation license is held to `MAX_DAYS` from its `not_before`, `MAX_DEVICES`
  devices and `MAX_GRACE_DAYS` of grace, whatever it claims: the claims are cut down, not
  refused, so a vendor's generous trial still runs, inside the bounds;
- its share and prices are evaluation terms: every output that shows them says so, and a
  vendor never bills them.

Nothing stops such a key from issuing another 90-day license tomorrow; what it can never
produce is a production license, which needs a key certified by the vendor root (`chain`).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from luminal.errors import SignatureInvalid
from luminal.licensing.keys import TrustedKey
from luminal.licensing.license import Entitlements, LicenseClaims

MAX_DAYS = 90
MAX_DEVICES = 4
MAX_GRACE_DAYS = 7

#: How outputs mark a license held to evaluation terms.
TERMS_NOTE = "evaluation terms: not a production license; share and prices are not billable"


def bound(claims: LicenseClaims, signer: TrustedKey, where: str) -> LicenseClaims:
    """`claims` as enforced: unchanged for a root-certified signer, else evaluation-bounded.

    Raises SignatureInvalid for non-evaluation claims by a locally trusted key.
    """
    if signer.production:
        return claims
    if not claims.evaluation:
        raise SignatureInvalid(
            f"license {claims.license_id}{where}: claims production terms but its signing key "
            f"{signer.keyid} is trusted only by local (evaluation) setting, not certified by "
            "the vendor root; a locally trusted key can only sign evaluation licenses: ask the "
            "vendor for a license signed by a certified key"
        )
    e = claims.entitlements
    return replace(
        claims,
        expires_at=min(claims.expires_at, claims.not_before + timedelta(days=MAX_DAYS)),
        grace_days=min(claims.grace_days, MAX_GRACE_DAYS),
        entitlements=Entitlements(e.targets, min(e.devices, MAX_DEVICES), e.features),
    )
