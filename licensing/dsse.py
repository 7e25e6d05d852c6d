"""DSSE envelopes: the one signed-document format for licenses, requests, reports and usage.

An envelope carries a payload, its type, and signatures over the pre-authentication
encoding (PAE) of both, so a verifier never needs to canonicalize JSON::

    PAE(type, body) = "DSSEv1" SP len(type) SP type SP len(body) SP body

with lengths as ASCII decimal byte counts.  On disk an envelope is JSON::

    {"payloadType": "...", "payload": "<base64>", "signatures": [{"keyid": "...", "sig": "<base64>"}]}

See https://github.com/secure-systems-lab/dsse (protocol v1.0).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from luminal.errors import IntegrityError

#: Payload types of the documents luminal signs.
LICENSE_TYPE = "application/vnd.luminal.license+json"
REQUEST_TYPE = "application/vnd.luminal.activation-request+json"
USAGE_TYPE = "application/vnd.luminal.usage+json"
UPLOAD_TYPE = "application/vnd.luminal.usage-upload+json"
CHECKPOINT_TYPE = "application/vnd.luminal.ledger-checkpoint+json"
REPORT_TYPE = "application/vnd.in-toto+json"


def pae(payload_type: str, payload: bytes) -> bytes:
    """The pre-authentication encoding that is actually signed."""
    t = payload_type.encode()
    return b"DSSEv1 %d %b %d %b" % (len(t), t, len(payload), payload)


@dataclass(frozen=True)
class Signature:
    keyid: str
    sig: bytes


@dataclass(frozen=True)
class Envelope:
    payload_type: str
    payload: bytes
    signatures: tuple[Signature, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "payloadType": self.payload_type,
            "payload": base64.b64encode(self.payload).decode(),
            "signatures": [
                {"keyid": s.keyid, "sig": base64.b64encode(s.sig).decode()} for s in self.signatures
            ],
        }

    def dumps(self) -> bytes:
        return (json.dumps(self.to_json(), indent=2) + "\n").encode()

    @classmethod
    def from_json(cls, data: object) -> Envelope:
        if not isinstance(data, dict):
            raise IntegrityError("not a DSSE envelope: expected a JSON object")
        try:
            payload_type = data["payloadType"]
            payload = _b64(data["payload"], "payload")
            sigs = data["signatures"]
            if not isinstance(payload_type, str) or not isinstance(sigs, list) or not sigs:
                raise IntegrityError("not a DSSE envelope: payloadType or signatures malformed")
            signatures = tuple(
                Signature(keyid=str(s["keyid"]), sig=_b64(s["sig"], "sig")) for s in sigs
            )
        except (KeyError, TypeError) as err:
            raise IntegrityError(f"not a DSSE envelope: missing field {err}") from None
        return cls(payload_type, payload, signatures)

    @classmethod
    def loads(cls, raw: bytes | str) -> Envelope:
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError) as err:
            raise IntegrityError(f"not a DSSE envelope: invalid JSON ({err})") from None
        return cls.from_json(data)

    def payload_json(self) -> object:
        try:
            return json.loads(self.payload)
        except (ValueError, UnicodeDecodeError, RecursionError) as err:
            raise IntegrityError(f"payload is not JSON ({err})") from None


def sign(payload_type: str, payload: bytes, keys: Mapping[str, Ed25519PrivateKey]) -> Envelope:
    """An envelope over `payload` with one signature per (keyid, private key)."""
    message = pae(payload_type, payload)
    sigs = tuple(Signature(keyid, key.sign(message)) for keyid, key in keys.items())
    return Envelope(payload_type, payload, sigs)


@dataclass(frozen=True)
class Verdict:
    """What the signatures of an envelope say against a set of trusted keys."""

    keyid: str | None  # a trusted key whose signature verifies, if any
    failed: tuple[str, ...]  # trusted keys whose signatures do not verify


def check_signatures(envelope: Envelope, trusted: Mapping[str, Ed25519PublicKey]) -> Verdict:
    """Signatures by keys not in `trusted` are ignored; one good signature by a trusted key
    is enough."""
    message = pae(envelope.payload_type, envelope.payload)
    failed = []
    for s in envelope.signatures:
        key = trusted.get(s.keyid)
        if key is None:
            continue
        try:
            key.verify(s.sig, message)
        except InvalidSignature:
            failed.append(s.keyid)
            continue
        return Verdict(s.keyid, tuple(failed))
    return Verdict(None, tuple(failed))


def verify(envelope: Envelope, trusted: Mapping[str, Ed25519PublicKey]) -> str:
    """The key id of a trusted key whose signature verifies; IntegrityError otherwise,
    saying whether the signature failed or the signer is unknown."""
    verdict = check_signatures(envelope, trusted)
    if verdict.keyid is not None:
        return verdict.keyid
    if verdict.failed:
        raise IntegrityError(
            f"signature by key {verdict.failed[0]} does not verify: the document was changed after signing"
        )
    ids = ", ".join(s.keyid for s in envelope.signatures)
    raise IntegrityError(f"signed by unknown key {ids}: not a trusted key")


def _b64(value: object, field: str) -> bytes:
    if not isinstance(value, str):
        raise IntegrityError(f"not a DSSE envelope: {field} is not base64 text")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise IntegrityError(f"not a DSSE envelope: {field} is not valid base64") from None
