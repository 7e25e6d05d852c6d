"""LicenseClaims <-> JSON, and malformed claims named by field."""

from __future__ import annotations

import json

import pytest

from luminal.errors import LicenseInvalid
from luminal.licensing import dsse
from luminal.licensing.license import Binding, Entitlements, LicenseClaims, Metering
from tests.helpers.licensing_helpers import Vendor, make_terms, other_identity


def test_claims_round_trip(vendor: Vendor) -> None:
    raw = vendor.license_for(other_identity())
    data = dsse.Envelope.loads(raw).payload_json()
    claims = LicenseClaims.from_json(data)
    assert claims.to_json() == data
    assert claims.binding.mode == "install" and claims.pricing.share == "1/3"
    assert str(claims.pricing.price("h100")) == "1.50"
    assert LicenseClaims.from_json(json.loads(json.dumps(claims.to_json()))) == claims


def test_malformed_claims_name_the_field(vendor: Vendor) -> None:
    data = dsse.Envelope.loads(vendor.license_for(None)).payload_json()
    for change, message in (
        ({"schema": "x"}, "license.schema"),
        ({"expires_at": "soon"}, "license.expires_at: not an ISO 8601 time"),
        ({"grace_days": "14"}, "license.grace_days: expected int"),
        ({"license_id": None}, "license.license_id: expected str"),
    ):
        with pytest.raises(LicenseInvalid, match=message):
            LicenseClaims.from_json({**data, **change})
    with pytest.raises(LicenseInvalid, match="unknown feature 'fly'"):
        Entitlements(("cpu",), 1, ("fly",))
    with pytest.raises(LicenseInvalid, match="needs install_keyid and fingerprint"):
        Binding("install")
    with pytest.raises(LicenseInvalid, match="endpoint: required"):
        Metering("online")
    assert make_terms().to_json()["entitlements"]["targets"] == ["cpu"]
