"""The trust chain through the CLI: what a hostile customer tries, each refused with exit 3."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from luminal.licensing import evaluation
from luminal.licensing.timeutil import from_iso, to_iso, utcnow
from tests.helpers.licensing_helpers import Vendor, make_terms, vendor_cli


def _request(cli, tmp_path: Path, name: str = "request.json") -> Path:
    req = tmp_path / name
    rc, _, err = cli("license", "request", "-o", req)
    assert rc == 0, err
    return req


def _activated(cli, vendor: Vendor, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    """A license the certified vendor key issued for this install's request."""
    req = _request(cli, tmp_path)
    lic = tmp_path / "license.json"
    rc, _, err = vendor_cli("activate", req, "-k", vendor.key_path, "--licensee", "acme", "-o", lic)
    assert rc == 0, err
    return lic


def _self_issued(tmp_path: Path, *extra: object) -> Path:
    """What a customer can do alone: an uncertified key and a floating license it signs."""
    prefix = tmp_path / "mine" / "key"
    rc, _, err = vendor_cli("keygen", "-o", prefix)
    assert rc == 0, err
    out = tmp_path / "mine.license.json"
    rc, _, err = vendor_cli(
        "issue", "-k", f"{prefix}.key", "--floating", "--licensee", "me",
        "--targets", "cpu,cuda,rocm,asic", "--devices", "9999", "--share", "0",
        "--days", "36500", "-o", out, *extra,
    )  # fmt: skip
    assert rc == 0, err
    return out


def test_self_issued_production_license_is_refused(cli, tmp_path: Path) -> None:
    lic = _self_issued(tmp_path)
    rc, _, err = cli("license", "trust", tmp_path / "mine" / "key.pub.json")
    assert rc == 2 and "not certified by the vendor root" in err
    rc, out, err = cli("license", "trust", tmp_path / "mine" / "key.pub.json", "--evaluation")
    assert rc == 0 and "can only sign evaluation licenses" in out
    rc, _, err = cli("license", "install", lic)
    assert rc == 3
    assert "claims production terms" in err
    assert "trusted only by local (evaluation) setting, not certified by the vendor root" in err
    rc, _, err = cli("license", "check", "--feature", "compile", "--target", "cuda")
    assert rc == 3 and "no license installed" in err


def test_self_issued_evaluation_license_is_held_to_the_bounds(cli, tmp_path: Path) -> None:
    lic = _self_issued(tmp_path, "--evaluation")
    assert cli("license", "trust", tmp_path / "mine" / "key.pub.json", "--evaluation")[0] == 0
    rc, out, err = cli("license", "install", lic)
    assert rc == 0, err
    assert "(EVALUATION)" in out and evaluation.TERMS_NOTE in out

    rc, out, _ = cli("license", "show", "--json")
    data = json.loads(out)
    claims = data["license"]
    days = from_iso(claims["expires_at"]) - from_iso(claims["not_before"])
    assert days == timedelta(days=evaluation.MAX_DAYS)
    assert claims["entitlements"]["devices"] == evaluation.MAX_DEVICES
    assert claims["grace_days"] == evaluation.MAX_GRACE_DAYS
    assert data["evaluation"] is True and data["terms"] == evaluation.TERMS_NOTE
    assert data["signer"]["production"] is False

    rc, out, _ = cli("license", "show")
    assert rc == 0 and "EVALUATION terms, not billable" in out and "(EVALUATION)" in out

    rc, out, _ = cli("license", "check", "--feature", "compile", "--target", "cuda", "--json")
    assert rc == 0 and json.loads(out)["evaluation"] is True
    rc, _, err = cli(
        "license", "check", "--feature", "compile", "--target", "cpu", "--devices", "5"
    )
    assert rc == 3 and "allows 4 device(s); 5 requested" in err


def test_a_certificate_from_another_root_is_refused(cli, vendor_root: Vendor, tmp_path) -> None:
    stranger = Vendor.create(tmp_path / "stranger")
    rc, _, err = cli("license", "trust", stranger.cert_path)
    assert rc == 3 and f"key {stranger.public.keyid} is not certified by a vendor root" in err
    rc, out, err = cli("license", "trust", vendor_root.cert_path)
    assert rc == 0 and f"certified by root {vendor_root.root_public.keyid}" in out


def test_a_license_carries_its_certificate(cli, vendor_root: Vendor, tmp_path: Path) -> None:
    """No trust step: the certificate inside the license is verified against the roots."""
    lic = _activated(cli, vendor_root, tmp_path)
    rc, out, err = cli("license", "install", lic)
    assert rc == 0, err
    assert "(commercial)" in out and "(production key)" in out
    data = json.loads(cli("license", "show", "--json")[1])
    assert data["signer"]["trusted_by"] == f"certified by root {vendor_root.root_public.keyid}"
    assert data["evaluation"] is False and data["terms"] == "production"


def test_retired_key_with_a_backdated_license_is_refused(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = utcnow()
    retired = Vendor.create(
        tmp_path / "old", not_before=now - timedelta(days=400), not_after=now - timedelta(days=10)
    )
    from luminal.licensing import keys

    monkeypatch.setattr(keys, "shipped_keyring", retired.release_keyring)
    req = _request(cli, tmp_path)
    lic = tmp_path / "backdated.json"
    backdated = now - timedelta(days=30)
    rc, _, err = vendor_cli(
        "activate", req, "-k", retired.key_path, "--licensee", "acme",
        "--not-before", to_iso(backdated), "--expires", to_iso(now + timedelta(days=300)),
        "-o", lic,
    )  # fmt: skip
    assert rc == 0, err
    # the signer dated it today: outside the window
    rc, _, err = cli("license", "install", lic)
    assert rc == 3 and "was not valid on the issue date" in err
    # dated back into the window: this install saw it only after the key retired
    from luminal.licensing.home import Home
    from luminal.licensing.identity import load_or_create

    me = load_or_create(Home.resolve())
    retired.write_license(
        lic, me, terms=make_terms(evaluation=False), now=backdated,
        expires_at=now + timedelta(days=300),
    )  # fmt: skip
    rc, _, err = cli("license", "install", lic)
    assert rc == 3
    assert f"signing key {retired.public.keyid} retired on" in err
    assert "a retired key cannot sign a license that installs, however its issue date reads" in err


def _machine(root: Path, machine_id: str) -> Path:
    (root / "etc").mkdir(parents=True, exist_ok=True)
    (root / "etc" / "machine-id").write_text(machine_id + "\n")
    return root


def test_copied_home_under_another_machine_id_is_refused(
    cli, vendor_root: Vendor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LUMINAL_HARDWARE_ROOT", str(_machine(tmp_path / "a", "aaaa")))
    lic = _activated(cli, vendor_root, tmp_path)
    assert cli("license", "install", lic)[0] == 0
    assert cli("license", "check", "--feature", "compile", "--target", "cpu")[0] == 0

    # the same LUMINAL_HOME, read on another machine
    monkeypatch.setenv("LUMINAL_HARDWARE_ROOT", str(_machine(tmp_path / "b", "bbbb")))
    rc, _, err = cli("license", "check", "--feature", "compile", "--target", "cpu")
    assert rc == 3
    assert "machine id differs" in err and "CPU differs" not in err
    assert "was this LUMINAL_HOME copied from another machine?" in err


def test_future_clock_excursion_then_recovery_with_a_token(
    cli, vendor_root: Vendor, tmp_path: Path, home
) -> None:
    from luminal.licensing import clock

    lic = _activated(cli, vendor_root, tmp_path)
    assert cli("license", "install", lic)[0] == 0
    clock.observe(home, utcnow() + timedelta(days=50))  # one run under a clock 50 days ahead

    rc, _, err = cli("license", "check", "--feature", "compile", "--target", "cpu")
    assert rc == 3 and "clock rollback" in err
    for step in ("license clock-reset-request", "luminal-vendor clock-reset", "license activate"):
        assert step in err
    assert clock.read(home).excursion is not None  # recorded

    reset_req = tmp_path / "reset-request.json"
    rc, out, err = cli("license", "clock-reset-request", "-o", reset_req)
    assert rc == 0, err
    token = tmp_path / "token.json"
    rc, _, err = vendor_cli("clock-reset", reset_req, "-k", vendor_root.key_path, "-o", token)
    assert rc == 0, err
    rc, out, err = cli("license", "clock-reset", token)
    assert rc == 0, err and "clock record reset" in out
    assert cli("license", "check", "--feature", "compile", "--target", "cpu")[0] == 0
    assert clock.read(home).excursion is None

    # a token resets once
    rc, _, err = cli("license", "clock-reset", token)
    assert rc == 3 and "answers another request (or one already used)" in err


def test_clock_reset_needs_a_certified_key(cli, vendor_root: Vendor, tmp_path: Path) -> None:
    reset_req = tmp_path / "reset-request.json"
    assert cli("license", "clock-reset-request", "-o", reset_req)[0] == 0
    prefix = tmp_path / "mine" / "key"
    assert vendor_cli("keygen", "-o", prefix)[0] == 0
    assert cli("license", "trust", f"{prefix}.pub.json", "--evaluation")[0] == 0
    token = tmp_path / "token.json"
    assert vendor_cli("clock-reset", reset_req, "-k", f"{prefix}.key", "-o", token)[0] == 0
    rc, _, err = cli("license", "clock-reset", token)
    assert rc == 3 and "not signed by a root-certified vendor key" in err


def test_future_clock_excursion_then_recovery_by_activation(
    cli, vendor_root: Vendor, tmp_path: Path, home
) -> None:
    from luminal.licensing import clock

    req = _request(cli, tmp_path)
    lic = tmp_path / "license.json"
    args = ("activate", req, "-k", vendor_root.key_path, "--licensee", "acme", "-o", lic)
    assert vendor_cli(*args)[0] == 0
    assert cli("license", "install", lic)[0] == 0
    clock.observe(home, utcnow() + timedelta(days=50))
    assert cli("license", "check", "--feature", "compile", "--target", "cpu")[0] == 3
    # a freshly issued license for this install vouches for the time
    assert vendor_cli(*args)[0] == 0
    rc, _, err = cli("license", "install", lic)
    assert rc == 0, err
    assert cli("license", "check", "--feature", "compile", "--target", "cpu")[0] == 0


def test_a_license_installed_before_its_key_retired_keeps_working(home, tmp_path: Path) -> None:
    """Rotation never strands a customer: the first-seen time, not the clock, decides."""
    from luminal.licensing import check
    from luminal.licensing.activation import install
    from luminal.licensing.identity import load_or_create

    now = utcnow()
    vendor = Vendor.create(tmp_path / "v", not_after=now + timedelta(days=10))
    raw = vendor.license_for(load_or_create(home), make_terms(evaluation=False))
    install(raw, "test", home=home, keyring=vendor.keyring(), now=now)
    later = now + timedelta(days=20)
    status = check("compile", "cpu", now=later, home=home, keyring=vendor.keyring())
    assert status.state == "valid" and status.production_key and not status.evaluation
    # another license from the same key, dated inside its window, seen after retirement
    other = vendor.license_for(
        load_or_create(home), make_terms(licensee="other", evaluation=False), now=now
    )
    from luminal.errors import SignatureInvalid

    with pytest.raises(SignatureInvalid, match="retired on"):
        install(other, "test", home=home, keyring=vendor.keyring(), now=later)
