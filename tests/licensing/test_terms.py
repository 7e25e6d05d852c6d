"""A report's billing terms are the license's: `licensing.terms.license_terms`."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from luminal.errors import UsageError
from luminal.licensing import check
from luminal.licensing.terms import COMMAND_LINE, TermsKind, license_terms
from tests.helpers.licensing_helpers import Vendor, make_terms


def _status(cli, vendor: Vendor, tmp_path: Path, *, evaluation: bool):  # type: ignore[no-untyped-def]
    from luminal.licensing.home import Home
    from luminal.licensing.identity import load_or_create

    me = load_or_create(Home.resolve())
    lic = vendor.write_license(tmp_path / "l.json", me, terms=make_terms(evaluation=evaluation))
    assert cli("license", "install", lic)[0] == 0
    return check("bench", "cpu"), lic


def test_production_terms_come_from_the_price_book(cli, vendor_root: Vendor, tmp_path) -> None:  # type: ignore[no-untyped-def]
    status, lic = _status(cli, vendor_root, tmp_path, evaluation=False)
    assert status.digest == hashlib.sha256(lic.read_bytes()).hexdigest()
    t = license_terms(
        status.claims, evaluation=status.evaluation, sha256=status.digest, device_class="cpu"
    )
    assert t.kind is TermsKind.PRODUCTION and t.billable
    assert t.pricing_json() == {
        "price_per_hour": "0.10",
        "share": "1/3",
        "currency": "USD",
        "device_class": "cpu",
        "source": f"license {status.claims.license_id}",
        "terms": "production",
    }
    assert t.license.to_json() == {"id": status.claims.license_id, "sha256": status.digest}
    none = license_terms(status.claims, evaluation=False, sha256="x", device_class="rocm")
    assert none.price_per_hour is None and not none.billable  # no price for that class
    with pytest.raises(UsageError, match="only for evaluation licenses"):
        license_terms(
            status.claims, evaluation=False, sha256="x", device_class="cpu", price_per_hour="0.001"
        )


def test_a_command_line_price_is_evaluation_terms(cli, vendor_root: Vendor, tmp_path) -> None:  # type: ignore[no-untyped-def]
    status, _ = _status(cli, vendor_root, tmp_path, evaluation=True)
    t = license_terms(
        status.claims, evaluation=status.evaluation, sha256=status.digest, device_class="cpu",
        price_per_hour="2.5",
    )  # fmt: skip
    assert t.kind is TermsKind.EVALUATION and not t.billable
    assert t.source == COMMAND_LINE and t.price_per_hour == "2.5" and t.share == "1/3"
