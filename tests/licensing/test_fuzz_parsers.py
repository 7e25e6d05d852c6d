"""Fuzzing the license, certificate and DSSE envelope parsers: only LuminalError comes out.

Each parser gets mutated inputs of three kinds: bytes of a valid document changed at
random (flips, inserts, cuts), a valid JSON document with one field replaced by arbitrary
JSON, and (the deep case) claims or certificate payloads replaced field by field and then
*signed again* with the real key, so the mutation reaches the claims parser past the
signature check.  Any exception other than a LuminalError subclass is a crash.

    default suite: ~200 inputs per parser
    pytest -m slow tests/licensing/test_fuzz_parsers.py   # 10,000 inputs per parser
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from luminal.errors import LuminalError  # noqa: E402
from luminal.licensing import chain, clockreset, dsse  # noqa: E402
from luminal.licensing.enforce import verify_license  # noqa: E402
from tests.helpers.licensing_helpers import Vendor, make_terms  # noqa: E402

DEFAULT = 200
SLOW = 10_000


def _vendor(tmp_path_factory: pytest.TempPathFactory) -> Vendor:
    return Vendor.create(tmp_path_factory.mktemp("fuzz-vendor"))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    vendor = _vendor(tmp_path_factory)
    license_raw = vendor.license_for(None, make_terms(evaluation=False))
    return {
        "vendor": vendor,
        "keyring": vendor.release_keyring(),
        "license": license_raw,
        "claims": json.loads(dsse.Envelope.loads(license_raw).payload),
        "cert": vendor.cert_path.read_bytes(),
        "cert_claims": json.loads(dsse.Envelope.loads(vendor.cert_path.read_bytes()).payload),
    }


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40)
    | st.sampled_from(["2026-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "-1", "1/3", "cpu"]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def byte_mutations(draw: st.DrawFn, raw: bytes) -> bytes:
    data = bytearray(raw)
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        i = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[i] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete" and data:
            del data[i : i + draw(st.integers(1, 16))]
        else:
            del data[i:]
    return bytes(data)


@st.composite
def field_mutations(draw: st.DrawFn, doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` with up to three (possibly nested) fields replaced, removed or added."""
    doc = json.loads(json.dumps(doc))
    for _ in range(draw(st.integers(1, 3))):
        target = doc
        while True:
            keys = sorted(target)
            if not keys:
                break
            key = draw(st.sampled_from(keys))
            if isinstance(target[key], dict) and draw(st.booleans()):
                target = target[key]
                continue
            action = draw(st.sampled_from(["replace", "delete", "add"]))
            if action == "replace":
                target[key] = draw(json_values)
            elif action == "delete":
                del target[key]
            else:
                target[draw(st.text(max_size=12))] = draw(json_values)
            break
    return doc


def _only_luminal_errors(fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except LuminalError:
        pass


def _resign_license(corpus: dict[str, Any], claims: dict[str, Any]) -> bytes:
    payload = json.dumps(claims).encode()
    return corpus["vendor"].signer.sign(dsse.LICENSE_TYPE, payload).dumps()


def _resign_cert(corpus: dict[str, Any], cert: dict[str, Any]) -> dict[str, Any]:
    root = corpus["vendor"].root
    env = dsse.sign(
        chain.CERT_TYPE, json.dumps(cert).encode(), {chain.key_id(root.public_key()): root}
    )
    return env.to_json()


def _cases(n: int):  # type: ignore[no-untyped-def]
    fuzz = settings(
        max_examples=n,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )

    @fuzz
    @given(data=st.data())
    def license_bytes(corpus: dict[str, Any], data: st.DataObject) -> None:
        raw = data.draw(byte_mutations(corpus["license"]))
        _only_luminal_errors(verify_license, raw, corpus["keyring"], "fuzz")

    @fuzz
    @given(data=st.data())
    def license_claims(corpus: dict[str, Any], data: st.DataObject) -> None:
        claims = data.draw(field_mutations(corpus["claims"]))
        raw = _resign_license(corpus, claims)
        _only_luminal_errors(verify_license, raw, corpus["keyring"], "fuzz")

    @fuzz
    @given(data=st.data())
    def certificate(corpus: dict[str, Any], data: st.DataObject) -> None:
        if data.draw(st.booleans()):
            cert = _resign_cert(corpus, data.draw(field_mutations(corpus["cert_claims"])))
        else:
            raw = data.draw(byte_mutations(corpus["cert"]))
            try:
                cert = json.loads(raw)
            except (ValueError, UnicodeDecodeError, RecursionError):
                return
        _only_luminal_errors(chain.verify_certificate, cert, corpus["keyring"])
        # the certificate inside a license, signed again: through the whole verifier
        claims = dict(corpus["claims"], signer_certificate=cert)
        _only_luminal_errors(verify_license, _resign_license(corpus, claims), corpus["keyring"], "")

    @fuzz
    @given(data=st.data())
    def envelope(corpus: dict[str, Any], data: st.DataObject) -> None:
        if data.draw(st.booleans()):
            raw = data.draw(byte_mutations(corpus["license"]))
        else:
            doc = data.draw(field_mutations(json.loads(corpus["license"])))
            raw = json.dumps(doc).encode()
        _only_luminal_errors(dsse.Envelope.loads, raw)
        _only_luminal_errors(clockreset.read_request, raw, "fuzz")

    return license_bytes, license_claims, certificate, envelope


_fast = _cases(DEFAULT)
_slow = _cases(SLOW)


@pytest.mark.parametrize("case", _fast, ids=lambda f: f.__name__)
def test_parsers_raise_only_luminal_errors(corpus: dict[str, Any], case: Any) -> None:
    case(corpus)


@pytest.mark.slow
@pytest.mark.parametrize("case", _slow, ids=lambda f: f.__name__)
def test_parsers_raise_only_luminal_errors_10k(corpus: dict[str, Any], case: Any) -> None:
    case(corpus)


@pytest.mark.parametrize("depth", [10, 100_000])
def test_deeply_nested_json_is_refused_not_a_crash(corpus: dict[str, Any], depth: int) -> None:
    deep = b"[" * depth + b"]" * depth
    _only_luminal_errors(dsse.Envelope.loads, deep)
    _only_luminal_errors(verify_license, deep, corpus["keyring"], "fuzz")
    claims = dict(corpus["claims"], licensee=json.loads(b"[" * 500 + b"]" * 500))
    _only_luminal_errors(verify_license, _resign_license(corpus, claims), corpus["keyring"], "")


def test_a_valid_license_passes_the_fuzzed_verifier(corpus: dict[str, Any], tmp_path: Path) -> None:
    """The oracle side: the unmutated corpus verifies, so the fuzz exercises real parsing."""
    claims, signer = verify_license(corpus["license"], corpus["keyring"], "fuzz")
    assert signer.production and claims.licensee.id == "acme"
