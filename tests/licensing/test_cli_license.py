"""`luminal license ...` end to end: the offline round trip, and every refusal with exit 3."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from luminal.licensing import clock
from luminal.licensing.timeutil import to_iso, utcnow
from tests.helpers.licensing_helpers import (
    Vendor,
    change_one_byte,
    make_terms,
    other_identity,
    vendor_cli,
)


@pytest.fixture
def trusted(cli, vendor_root: Vendor) -> Vendor:
    """The test vendor's signing key, certified by its root (the stand-in release root)."""
    rc, out, err = cli("license", "trust", vendor_root.cert_path)
    assert rc == 0, err
    assert f"trusting key {vendor_root.public.keyid}" in out
    assert f"certified by root {vendor_root.root_public.keyid}" in out
    return vendor_root


def _request(cli, tmp_path: Path) -> Path:
    req = tmp_path / "request.json"
    rc, out, err = cli("license", "request", "-o", req)
    assert rc == 0, err
    assert "activation request for install" in out
    return req


def _issue(vendor: Vendor, req: Path, out: Path, *extra: object) -> Path:
    rc, out_text, err = vendor_cli(
        "issue",
        "-k",
        vendor.key_path,
        "--request",
        req,
        "--licensee",
        "acme",
        "--targets",
        "cpu,rocm",
        "--devices",
        "2",
        "--price",
        "cpu=0.10",
        "--evaluation",
        "-o",
        out,
        *extra,
    )
    assert rc == 0, err
    assert f"{out}: license LIC-" in out_text
    return out


def _installed(cli, trusted: Vendor, tmp_path: Path, *extra: object) -> Path:
    lic = _issue(trusted, _request(cli, tmp_path), tmp_path / "license.json", *extra)
    rc, _, err = cli("license", "install", lic)
    assert rc == 0, err
    return lic


def test_offline_activation_round_trip(cli, vendor: Vendor, tmp_path: Path) -> None:
    req = _request(cli, tmp_path)
    terms = tmp_path / "terms.json"
    terms.write_text(json.dumps(make_terms(targets=("cpu", "rocm")).to_json()))
    lic = tmp_path / "license.json"
    rc, out, err = vendor_cli("activate", req, "-k", vendor.key_path, "--terms", terms, "-o", lic)
    assert rc == 0, err
    assert "for acme (install " in out

    # not trusted yet: the shipped keyring does not know the test key
    rc, _, err = cli("license", "install", lic)
    assert rc == 3 and f"signed by unknown key {vendor.public.keyid}" in err

    assert cli("license", "trust", vendor.pub_path, "--evaluation")[0] == 0
    rc, out, err = cli("license", "install", lic)
    assert rc == 0, err
    assert "installed license LIC-" in out and "NOT a production key" in out

    rc, out, err = cli("license", "check", "--feature", "compile", "--target", "rocm")
    assert rc == 0, err
    assert out.startswith("OK: compile on rocm")

    rc, out, err = cli("license", "show")
    assert rc == 0, err
    expected = ["VALID", "ACME Corp (acme)", "cpu, rocm", "1/3 of measured savings (USD)"]
    expected += ["h100 1.50/h", vendor.public.keyid, "NOT a production key"]
    for text in expected:
        assert text in out, text

    rc, out, _ = cli("license", "show", "--json")
    data = json.loads(out)
    assert rc == 0 and data["state"] == "valid" and data["error"] is None
    assert data["signer"] == {
        "keyid": vendor.public.keyid,
        "production": False,
        "trust": "NOT a production key, trusted by local setting",
        "trusted_by": data["signer"]["trusted_by"],
        "valid": vendor.public.window(),
    }
    assert data["license"]["binding"]["install_keyid"] == data["install"]["keyid"]
    assert data["license"]["evaluation"] is True


def test_show_without_license(cli) -> None:
    rc, out, err = cli("license", "show", "--json")
    data = json.loads(out)
    assert rc == 3 and data["state"] == "missing" and "no license installed" in data["error"]
    rc, out, err = cli("license", "show")
    assert rc == 3 and "NO LICENSE" in out and "error: no license installed" in err


def test_changed_byte_is_refused(cli, trusted: Vendor, tmp_path: Path) -> None:
    lic = _issue(trusted, _request(cli, tmp_path), tmp_path / "license.json")
    bad = tmp_path / "tampered.json"
    bad.write_bytes(change_one_byte(lic.read_bytes()))
    rc, _, err = cli("license", "install", bad)
    assert rc == 3
    assert (
        f"license {bad}: signature invalid: signature by key {trusted.public.keyid} does not verify"
        in err
    )
    # and an installed license changed in place
    assert cli("license", "install", lic)[0] == 0
    home_license = Path(json.loads(cli("license", "show", "--json")[1])["home"]) / "license.json"
    home_license.write_bytes(change_one_byte(home_license.read_bytes()))
    rc, _, err = cli("license", "check", "--feature", "compile", "--target", "cpu")
    assert rc == 3 and "signature invalid" in err and "changed after signing" in err


def test_license_for_another_install_is_refused(cli, trusted: Vendor, tmp_path: Path) -> None:
    lic = trusted.write_license(tmp_path / "other.json", other_identity("e" * 32))
    rc, _, err = cli("license", "install", lic)
    assert rc == 3
    assert "is for another install: it is bound to install key" in err
    assert f"(fingerprint {'e' * 32}), this install is" in err


def test_expired_past_grace_is_refused(cli, trusted: Vendor, tmp_path: Path, home) -> None:
    now = utcnow()
    expires = now - timedelta(days=20)
    args = ("--not-before", to_iso(now - timedelta(days=400)), "--expires", to_iso(expires))
    lic = _issue(trusted, _request(cli, tmp_path), tmp_path / "old.json", *args)
    rc, _, err = cli("license", "install", lic)
    assert rc == 3
    assert f"expired on {expires:%Y-%m-%d} and its 14-day grace period ended on" in err
    home.license.write_bytes(lic.read_bytes())  # installed earlier, now past grace
    rc, _, err = cli("license", "check", "--feature", "compile", "--target", "cpu")
    assert rc == 3 and "grace period ended" in err


def test_grace_period_warns_but_allows(cli, trusted: Vendor, tmp_path: Path) -> None:
    now = utcnow()
    args = (
        "--not-before",
        to_iso(now - timedelta(days=30)),
        "--expires",
        to_iso(now - timedelta(days=1)),
    )
    _installed(cli, trusted, tmp_path, *args)
    rc, out, err = cli("license", "check", "--feature", "compile", "--target", "cpu")
    assert rc == 0 and "grace" in out
    assert "warning: license LIC-" in err and "grace period ends on" in err
    rc, out, _ = cli("license", "show")
    assert rc == 0 and "GRACE PERIOD" in out


def test_not_yet_valid_is_refused(cli, trusted: Vendor, tmp_path: Path) -> None:
    start = utcnow() + timedelta(days=10)
    lic = _issue(
        trusted, _request(cli, tmp_path), tmp_path / "future.json", "--not-before", to_iso(start)
    )
    rc, _, err = cli("license", "install", lic)
    assert rc == 3 and f"is not yet valid: valid from {to_iso(start)}" in err


def test_revoked_key_is_refused(cli, trusted: Vendor, tmp_path: Path) -> None:
    _installed(cli, trusted, tmp_path)
    keyid = trusted.public.keyid
    rc, out, _ = cli("license", "revoke", keyid, "--reason", "key compromised")
    assert rc == 0 and f"key {keyid} revoked" in out
    rc, _, err = cli("license", "check", "--feature", "compile", "--target", "cpu")
    assert rc == 3
    assert f"signing key {keyid} was revoked on" in err and ": key compromised;" in err


def test_clock_rollback_is_refused(cli, trusted: Vendor, tmp_path: Path, home) -> None:
    _installed(cli, trusted, tmp_path)
    later = utcnow() + timedelta(days=2)
    clock.observe(home, later)  # this install has already seen a later time
    rc, _, err = cli("license", "check", "--feature", "compile", "--target", "cpu")
    assert rc == 3
    assert "clock rollback: the system clock reads" in err
    assert f"earlier than the last time this install has seen ({to_iso(later)})" in err


def test_target_not_entitled_is_refused(cli, trusted: Vendor, tmp_path: Path) -> None:
    _installed(cli, trusted, tmp_path)
    rc, _, err = cli("license", "check", "--feature", "compile", "--target", "cuda")
    assert rc == 3 and "does not entitle target 'cuda' (entitled targets: cpu, rocm)" in err
    rc, _, err = cli(
        "license", "check", "--feature", "compile", "--target", "cpu", "--devices", "3"
    )
    assert rc == 3 and "allows 2 device(s); 3 requested" in err


def test_usage_errors_are_exit_2(cli, vendor: Vendor, tmp_path: Path) -> None:
    rc, _, err = cli("license", "install", tmp_path / "nope.json")
    assert rc == 2 and "no such file" in err
    rc, _, err = cli("license", "trust", vendor.pub_path)
    assert rc == 2 and "pass --evaluation" in err
    rc, _, err = cli("license", "check", "--feature", "fly", "--target", "cpu")
    assert rc == 2 and "--feature 'fly'" in err
    rc, _, err = cli("license", "check", "--feature", "compile", "--target", "cpu")
    assert rc == 3 and "no license installed" in err


def test_licensing_never_stops_running_a_model(cli, trusted: Vendor, tmp_path: Path, home) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    model = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), model)
    now = utcnow()
    args = (
        "--not-before",
        to_iso(now - timedelta(days=400)),
        "--expires",
        to_iso(now - timedelta(days=100)),
    )
    lic = _issue(trusted, _request(cli, tmp_path), tmp_path / "dead.json", *args)
    home.license.write_bytes(lic.read_bytes())
    assert cli("license", "check", "--feature", "compile", "--target", "cpu")[0] == 3
    rc, out, err = cli("run", model, "--reference", "--json")
    assert rc == 0, err
    assert json.loads(out)["outputs"]["y"]["shape"] == [2, 3]
