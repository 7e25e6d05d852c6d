"""Enforcement through the library: each refusal is its own error with a precise message."""

from __future__ import annotations

from datetime import timedelta

import pytest

from luminal.errors import (
    ClockRollback,
    KeyRevoked,
    LicenseExpired,
    LicenseInvalid,
    LicenseMissing,
    LicenseNotYetValid,
    NotEntitled,
    SignatureInvalid,
    WrongInstall,
)
from luminal.licensing import check
from luminal.licensing.identity import load_or_create
from luminal.licensing.timeutil import utcnow
from tests.helpers.licensing_helpers import (
    Vendor,
    change_one_byte,
    make_terms,
    other_identity,
    tamper_claims,
)


def _install(home, raw: bytes) -> None:
    home.ensure()
    home.license.write_bytes(raw)


def test_valid_production_license(home, vendor: Vendor) -> None:
    _install(home, vendor.license_for(load_or_create(home)))
    status = check("compile", "cpu", keyring=vendor.keyring(), devices=2)
    assert status.state == "valid" and status.production_key and status.warnings == ()
    assert status.to_json()["license"]["licensee"]["id"] == "acme"


def test_missing_license(home, vendor: Vendor) -> None:
    with pytest.raises(LicenseMissing, match=r"no license installed in .*luminal-home"):
        check("compile", "cpu", keyring=vendor.keyring())


def test_tampering_is_caught(home, vendor: Vendor) -> None:
    raw = vendor.license_for(load_or_create(home))
    _install(home, change_one_byte(raw))
    with pytest.raises(
        SignatureInvalid, match=r"signature invalid: signature by key .* does not verify"
    ):
        check("compile", "cpu", keyring=vendor.keyring())
    _install(home, tamper_claims(raw, grace_days=9999))
    with pytest.raises(SignatureInvalid, match="changed after signing"):
        check("compile", "cpu", keyring=vendor.keyring())
    _install(home, raw[:-20])
    with pytest.raises(LicenseInvalid, match="invalid JSON"):
        check("compile", "cpu", keyring=vendor.keyring())


def test_untrusted_signer(home, vendor: Vendor, tmp_path) -> None:
    stranger = Vendor.create(tmp_path / "stranger")
    _install(home, stranger.license_for(load_or_create(home)))
    with pytest.raises(SignatureInvalid, match=f"unknown key {stranger.public.keyid}"):
        check("compile", "cpu", keyring=vendor.keyring())


def test_revoked_key(home, vendor: Vendor) -> None:
    _install(home, vendor.license_for(load_or_create(home)))
    with pytest.raises(
        KeyRevoked,
        match=f"signing key {vendor.public.keyid} was revoked on 2025-06-01: test compromise",
    ):
        check("compile", "cpu", keyring=vendor.keyring(revoked=True))


def test_key_outside_its_window(home, vendor: Vendor) -> None:
    old = utcnow() - timedelta(days=400)
    _install(home, vendor.license_for(load_or_create(home), now=old))
    with pytest.raises(SignatureInvalid, match="was not valid on the issue date"):
        check("compile", "cpu", keyring=vendor.keyring())


def test_grace_then_expired(home, vendor: Vendor) -> None:
    now = utcnow()
    expires = now - timedelta(days=3)
    _install(
        home,
        vendor.license_for(
            load_or_create(home), not_before=now - timedelta(days=30), expires_at=expires
        ),
    )
    status = check("compile", "cpu", now=now, keyring=vendor.keyring())
    assert status.state == "grace"
    assert "grace period ends on" in status.warnings[0] and "10 days left" in status.warnings[0]
    with pytest.raises(
        LicenseExpired, match=f"expired on {expires:%Y-%m-%d} and its 14-day grace period ended on"
    ):
        check("compile", "cpu", now=now + timedelta(days=12), keyring=vendor.keyring())


def test_expiry_warning(home, vendor: Vendor) -> None:
    now = utcnow()
    _install(
        home, vendor.license_for(load_or_create(home), expires_at=now + timedelta(days=5, hours=1))
    )
    status = check("compile", "cpu", now=now, keyring=vendor.keyring())
    assert status.state == "valid" and "(5 days left)" in status.warnings[0]


def test_not_yet_valid(home, vendor: Vendor) -> None:
    now = utcnow()
    _install(home, vendor.license_for(load_or_create(home), not_before=now + timedelta(days=10)))
    with pytest.raises(LicenseNotYetValid, match="is not yet valid: valid from"):
        check("compile", "cpu", now=now, keyring=vendor.keyring())


def test_clock_rollback(home, vendor: Vendor) -> None:
    now = utcnow()
    _install(home, vendor.license_for(load_or_create(home)))
    check("compile", "cpu", now=now + timedelta(days=3), keyring=vendor.keyring())
    with pytest.raises(ClockRollback, match="earlier than the last time this install has seen"):
        check("compile", "cpu", now=now, keyring=vendor.keyring())


def test_wrong_install_and_floating(home, vendor: Vendor) -> None:
    me = load_or_create(home)
    _install(home, vendor.license_for(other_identity()))
    with pytest.raises(WrongInstall, match=f"this install is {me.keyid}"):
        check("compile", "cpu", keyring=vendor.keyring())
    # same key, other machine fingerprint
    from luminal.licensing.identity import InstallIdentity

    moved = InstallIdentity(me.private_key, "0" * 32, me.created_at)
    _install(home, vendor.license_for(moved))
    with pytest.raises(WrongInstall, match=r"fingerprint 0{32}"):
        check("compile", "cpu", keyring=vendor.keyring())
    _install(home, vendor.license_for(None))
    assert check("compile", "cpu", keyring=vendor.keyring()).claims.binding.mode == "floating"


def test_entitlements(home, vendor: Vendor) -> None:
    terms = make_terms(targets=("cpu", "asic"), features=("compile",), devices=2)
    _install(home, vendor.license_for(load_or_create(home), terms))
    ring = vendor.keyring()
    assert check("compile", "asic:tenstorrent", keyring=ring).state == "valid"
    with pytest.raises(
        NotEntitled, match=r"does not entitle target 'cuda' \(entitled targets: cpu, asic\)"
    ):
        check("compile", "cuda", keyring=ring)
    with pytest.raises(
        NotEntitled, match=r"does not include feature 'bench' \(licensed features: compile\)"
    ):
        check("bench", "cpu", keyring=ring)
    with pytest.raises(NotEntitled, match=r"allows 2 device\(s\); 4 requested"):
        check("compile", "cpu", devices=4, keyring=ring)
