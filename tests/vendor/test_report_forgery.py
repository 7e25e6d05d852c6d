"""Forged reports: refused by the customer's `report verify` and the vendor's `verify-report`.

Each forgery is re-derived and re-signed (`forge`), so the signature and the arithmetic
are good: what refuses it is the license (terms, bound install key) or the subjects.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from luminal.licensing import dsse
from luminal.licensing.keys import encode_public
from luminal.licensing.request import make_request
from tests.conftest import Cli
from tests.helpers.licensing_helpers import make_terms, other_identity, vendor_cli
from tests.vendor.conftest import Customer, forge

Check = Callable[[Cli, Customer, Path, tuple[str, ...]], tuple[int, str, str]]


def customer_verify(cli: Cli, c: Customer, report: Path, extra: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    return cli("report", "verify", report, *extra)  # the installed license, by default


def vendor_verify(cli: Cli, c: Customer, report: Path, extra: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    return vendor_cli("verify-report", report, "--license", c.license, *extra)


BOTH = pytest.mark.parametrize(
    "check", [customer_verify, vendor_verify], ids=["customer", "vendor"]
)


@BOTH
def test_an_honest_report_verifies_with_production_terms(cli, customer: Customer, check) -> None:  # type: ignore[no-untyped-def]
    rc, out, err = check(cli, customer, customer.report, ("--json",))
    assert rc == 0, err
    data = json.loads(out)
    assert data["terms"] == "production" and data["keyid"] == customer.identity.keyid
    assert data["savings"]["claimed"] and data["savings"]["billable"]
    assert data["savings"]["per_hour"]["price_per_hour"] == "0.10"  # the license's price book


def _share(s: dict[str, Any]) -> None:
    s["predicate"]["pricing"]["share"] = "0"


def _price(s: dict[str, Any]) -> None:
    s["predicate"]["pricing"]["price_per_hour"] = "0.001"


def _price_from_the_command_line(s: dict[str, Any]) -> None:
    s["predicate"]["pricing"].update(
        price_per_hour="0.001", source="--price-per-hour", terms="evaluation"
    )


def _currency(s: dict[str, Any]) -> None:
    s["predicate"]["pricing"]["currency"] = "JPY"


def _evaluation(s: dict[str, Any]) -> None:
    s["predicate"]["pricing"]["terms"] = "evaluation"


def _license_id(s: dict[str, Any]) -> None:
    s["predicate"]["license"]["id"] = "lic-other"


def _artifact_subject(s: dict[str, Any]) -> None:
    s["subject"][0]["digest"]["sha256"] = hashlib.sha256(b"another artifact").hexdigest()


def _model_subject(s: dict[str, Any]) -> None:
    s["subject"][1]["digest"]["sha256"] = hashlib.sha256(b"another model").hexdigest()


@BOTH
@pytest.mark.parametrize(
    ("change", "field"),
    [
        (_share, "predicate.pricing.share is '0' in the report, '1/3' in license"),
        (_price, "predicate.pricing.price_per_hour is '0.001'"),
        (_price_from_the_command_line, "does not allow"),
        (_currency, "predicate.pricing.currency"),
        (_evaluation, "predicate.pricing.terms"),
        (_license_id, "predicate.license.id"),
        (_artifact_subject, "artifact subjects are not"),
        (_model_subject, "baseline-model subject"),
    ],
)
def test_forged_terms_and_swapped_subjects_are_refused(  # type: ignore[no-untyped-def]
    cli, customer: Customer, check, change, field: str
) -> None:
    forged = forge(customer.report, change, customer.identity)
    rc, _, err = check(cli, customer, forged)
    assert rc == 4 and field in err, err
    assert len(err.strip().splitlines()) == 1


def _faster(s: dict[str, Any]) -> None:
    """Every candidate timing 20% faster: what a customer wanting a bigger bill basis..."""
    arms = s["predicate"]["scenarios"]["latency"]["measurement"]["arms"]
    arms["luminal"]["blocks"] = [[int(t * 0.8) for t in b] for b in arms["luminal"]["blocks"]]


@BOTH
def test_a_report_re_derived_and_signed_by_another_key_is_refused(  # type: ignore[no-untyped-def]
    cli, customer: Customer, check, tmp_path: Path
) -> None:
    forger = other_identity()
    forged = forge(customer.report, _faster, forger)
    rc, _, err = check(cli, customer, forged)
    assert rc == 4 and "not the install the license binds" in err, err
    b64 = encode_public(forger.public_key)
    flag = "--key" if check is customer_verify else "--install-key"
    rc, _, err = check(cli, customer, forged, (flag, b64))
    assert rc == 4 and f"is not install {customer.identity.keyid}" in err, err


@BOTH
def test_re_signed_with_the_bound_install_key_only_an_audit_can_tell(  # type: ignore[no-untyped-def]
    cli, customer: Customer, check
) -> None:
    """The install key is on the customer's disk: a report re-derived from rewritten timings
    and signed with it is consistent, and verifies (docs/licensing.md, "Trust model");
    tests/vendor/test_vendor_audit.py shows the audit catching it."""
    forged = forge(customer.report, _faster, customer.identity)
    rc, out, err = check(cli, customer, forged)
    assert rc == 0 and "OK" in out, err


@BOTH
def test_an_activation_request_or_a_license_is_not_a_report(  # type: ignore[no-untyped-def]
    cli, customer: Customer, check, tmp_path: Path
) -> None:
    request = tmp_path / "request.json"
    request.write_bytes(make_request(customer.identity).dumps())
    for doc in (request, customer.license):
        rc, _, err = check(cli, customer, doc)
        assert rc == 4 and "is not an in-toto Statement" in err, err


@BOTH
def test_a_report_checked_against_another_license_is_refused(  # type: ignore[no-untyped-def]
    cli, customer: Customer, check, tmp_path: Path
) -> None:
    other = customer.vendor.write_license(
        tmp_path / "other.json", customer.identity, terms=make_terms(evaluation=False)
    )
    if check is customer_verify:
        rc, _, err = cli("report", "verify", customer.report, "--license", other)
    else:
        rc, _, err = vendor_cli("verify-report", customer.report, "--license", other)
    assert rc == 4 and "predicate.license" in err, err


def _unsigned(raw: bytes) -> bytes:
    data = json.loads(raw)
    data["signatures"] = []
    return json.dumps(data).encode()


def _self_signed(raw: bytes) -> bytes:
    env = dsse.Envelope.loads(raw)
    me = other_identity()
    return dsse.sign(env.payload_type, env.payload, {me.keyid: me.private_key}).dumps()


@pytest.mark.parametrize("spoil", [_unsigned, _self_signed], ids=["unsigned", "self-signed"])
def test_the_vendor_refuses_a_license_not_chaining_to_its_root(  # type: ignore[no-untyped-def]
    customer: Customer, tmp_path: Path, spoil
) -> None:
    bad = tmp_path / "bad-license.json"
    bad.write_bytes(spoil(customer.license.read_bytes()))
    rc, _, err = vendor_cli("verify-report", customer.report, "--license", bad)
    assert rc == 4 and "cannot be trusted" in err, err


def test_the_vendor_trusts_its_roots_not_the_customers_local_trust(  # type: ignore[no-untyped-def]
    customer: Customer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from luminal.licensing import keys

    monkeypatch.setattr(keys, "shipped_keyring", lambda: keys.Keyring())
    rc, _, err = vendor_verify(None, customer, customer.report)  # type: ignore[arg-type]
    assert rc == 4 and "cannot be trusted" in err, err


def test_files_are_re_hashed_against_the_report(cli, customer: Customer, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    artifact, model = tmp_path / "model.lmnl", tmp_path / "model.onnx"
    artifact.write_bytes(b"the artifact measured")
    model.write_bytes(b"the baseline model measured")

    def measured(s: dict[str, Any]) -> None:  # a report naming these two files
        p = s["predicate"]
        p["candidate"]["artifact_digests"][0]["sha256"] = _sha(artifact)
        p["baseline"]["model_sha256"] = _sha(model)
        s["subject"][0]["digest"]["sha256"] = _sha(artifact)
        s["subject"][1]["digest"]["sha256"] = _sha(model)

    report = forge(customer.report, measured, customer.identity)
    args = ("--artifact", artifact, "--model", model)
    assert cli("report", "verify", report, *args)[0] == 0
    assert vendor_cli("verify-report", report, "--license", customer.license, *args)[0] == 0
    other = tmp_path / "other.lmnl"
    other.write_bytes(b"something else")
    rc, _, err = cli("report", "verify", report, "--artifact", other, "--model", model)
    assert rc == 4 and "is not an artifact the report measured" in err
    rc, _, err = vendor_cli(
        "verify-report", report, "--license", customer.license, "--model", other
    )
    assert rc == 4 and "is not the baseline model" in err


def test_price_per_hour_needs_an_evaluation_license(
    cli, customer: Customer, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    rc, _, err = cli("bench", tmp_path / "m.lmnl", "--price-per-hour", "0.001")
    assert rc == 2 and "only for evaluation licenses" in err, err


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@BOTH
def test_a_malformed_predicate_is_one_line_exit_4(cli, customer: Customer, check) -> None:  # type: ignore[no-untyped-def]
    def garble(s: dict[str, Any]) -> None:
        s["predicate"]["candidate"] = "not an object"

    statement = json.loads(dsse.Envelope.loads(customer.report.read_bytes()).payload)
    garble(statement)  # not re-derivable: sign it as it is
    forged = customer.report.with_name("garbled.json")
    forged.write_bytes(
        customer.identity.sign(dsse.REPORT_TYPE, json.dumps(statement).encode()).dumps()
    )
    rc, _, err = check(cli, customer, forged)
    assert rc == 4 and len(err.strip().splitlines()) == 1, err
