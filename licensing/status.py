"""Everything `luminal license show` prints, as one JSON-able dict.

It never raises for a license problem: the problem becomes `state` ("refused" or
"missing"), `error` and `exit_code`, and the claims are still shown when the signature
verifies (an expired license, say), so the operator sees what they have.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from luminal.errors import LicenseError, LicenseMissing
from luminal.licensing import clock
from luminal.licensing.enforce import check, verify_license
from luminal.licensing.evaluation import TERMS_NOTE
from luminal.licensing.home import Home
from luminal.licensing.identity import load_or_create
from luminal.licensing.keys import Keyring, TrustedKey, load_keyring
from luminal.licensing.license import LicenseClaims
from luminal.licensing.timeutil import to_iso

PRODUCTION = "production key (certified by a vendor root)"
NOT_PRODUCTION = "NOT a production key, trusted by local setting"


def describe(
    home: Home | None = None, keyring: Keyring | None = None, now: datetime | None = None
) -> dict[str, Any]:
    home = home or Home.resolve()
    keyring = keyring if keyring is not None else load_keyring(home.trusted_keys)
    identity = load_or_create(home)
    out: dict[str, Any] = {
        "home": str(home.root),
        "install": {k: v for k, v in identity.public_json().items() if k != "public_key"},
        "state": "valid",
        "exit_code": 0,
        "error": None,
        "warnings": [],
        "license": None,
        "signer": None,
        "evaluation": False,
    }
    claims: LicenseClaims | None = None
    signer: TrustedKey | None = None
    try:
        status = check(home=home, keyring=keyring, now=now)
        claims, signer = status.claims, status.signer
        out.update(state=status.state, warnings=list(status.warnings))
    except LicenseError as err:
        out.update(
            state="missing" if isinstance(err, LicenseMissing) else "refused",
            exit_code=err.exit_code,
            error=str(err),
        )
        if home.license.exists():
            try:
                claims, signer = verify_license(home.license.read_bytes(), keyring, "")
            except LicenseError:
                pass
    if claims is not None:
        out["license"] = claims.to_json()
        eval_terms = claims.evaluation or (signer is not None and not signer.production)
        out["evaluation"] = eval_terms
        out["terms"] = TERMS_NOTE if eval_terms else "production"
    if signer is not None:
        out["signer"] = {
            "keyid": signer.keyid,
            "production": signer.production,
            "trust": PRODUCTION if signer.production else NOT_PRODUCTION,
            "trusted_by": (
                f"certified by root {signer.certified_by}"
                if signer.production
                else str(home.trusted_keys)
            ),
            "valid": signer.window(),
        }
    last = clock.read(home).last_seen
    out["clock"] = {"last_seen": to_iso(last) if last else None}
    return out
