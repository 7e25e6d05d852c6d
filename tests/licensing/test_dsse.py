"""DSSE envelopes: the PAE bytes, sign and verify, and what a changed byte does."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from luminal.errors import IntegrityError
from luminal.licensing import dsse
from luminal.licensing.keys import key_id


def test_pae_is_the_dsse_v1_encoding() -> None:
    assert dsse.pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    # lengths are byte counts, not character counts
    assert dsse.pae("t", "é".encode()) == b"DSSEv1 1 t 2 \xc3\xa9"


def test_sign_verify_round_trip_through_json() -> None:
    key = Ed25519PrivateKey.generate()
    kid = key_id(key.public_key())
    env = dsse.sign("application/x-test", b'{"a": 1}', {kid: key})
    back = dsse.Envelope.loads(env.dumps())
    assert back == env
    assert set(json.loads(env.dumps())) == {"payloadType", "payload", "signatures"}
    assert dsse.verify(back, {kid: key.public_key()}) == kid
    assert back.payload_json() == {"a": 1}


def test_changed_payload_type_or_body_fails() -> None:
    key = Ed25519PrivateKey.generate()
    kid = key_id(key.public_key())
    env = dsse.sign("application/x-test", b"body", {kid: key})
    for bad in (
        dsse.Envelope("application/x-other", env.payload, env.signatures),
        dsse.Envelope(env.payload_type, b"bodY", env.signatures),
    ):
        with pytest.raises(IntegrityError, match=f"signature by key {kid} does not verify"):
            dsse.verify(bad, {kid: key.public_key()})


def test_unknown_signer_and_malformed_envelopes() -> None:
    key = Ed25519PrivateKey.generate()
    env = dsse.sign("t", b"x", {"k1": key})
    other = Ed25519PrivateKey.generate().public_key()
    with pytest.raises(IntegrityError, match="signed by unknown key k1"):
        dsse.verify(env, {"k2": other})
    with pytest.raises(IntegrityError, match="invalid JSON"):
        dsse.Envelope.loads(b"{not json")
    with pytest.raises(IntegrityError, match="not valid base64"):
        dsse.Envelope.loads(json.dumps({"payloadType": "t", "payload": "%%", "signatures": []}))
    with pytest.raises(IntegrityError, match="signatures malformed"):
        dsse.Envelope.loads(json.dumps({"payloadType": "t", "payload": "", "signatures": []}))
