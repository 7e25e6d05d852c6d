"""The trust chain: the vendor's root key certifies signing keys; signing keys sign licenses.

    keyring.json (shipped)   ROOT public keys: they sign nothing but certificates
          |  certificate (DSSE, `CERT_TYPE`): key id, public key, window, purpose
          v
    signing key              signs licenses and clock reset tokens issued in its window

A customer can generate keys, but not a certificate from the vendor's root: that is what
makes a license "production".  A certificate travels inside every license it signs
(`signer_certificate`), and `luminal license trust CERT` can store one locally; either
way it is verified against the shipped roots each time, so a stored certificate is never
trusted for having been stored.

A key trusted by explicit local setting (`license trust --evaluation`) has no certificate:
it is an *evaluation* key, and `enforce` only ever lets it yield evaluation licenses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from luminal.errors import IntegrityError, LicenseInvalid, SignatureInvalid
from luminal.licensing import dsse
from luminal.licensing.keys import Keyring, TrustedKey, decode_public, encode_public, key_id
from luminal.licensing.timeutil import from_iso, to_iso

CERT_TYPE = "application/vnd.luminal.key-certificate+json"
CERT_SCHEMA = "luminal.key-certificate/v1"


class KeyPurpose(Enum):
    """What a certified key may sign (licenses and the clock reset tokens of their installs)."""

    LICENSE_SIGNING = "license-signing"


@dataclass(frozen=True)
class Certificate:
    """The root's statement: `public_key` may sign licenses issued in [not_before, not_after)."""

    keyid: str
    public_key: str
    not_before: datetime
    not_after: datetime
    purpose: KeyPurpose
    issued_at: datetime
    comment: str = ""

    def __post_init__(self) -> None:
        if self.not_after <= self.not_before:
            raise LicenseInvalid(f"certificate of {self.keyid}: not_after is not after not_before")

    def to_json(self) -> dict[str, object]:
        return {
            "schema": CERT_SCHEMA,
            "keyid": self.keyid,
            "public_key": self.public_key,
            "not_before": to_iso(self.not_before),
            "not_after": to_iso(self.not_after),
            "purpose": self.purpose.value,
            "issued_at": to_iso(self.issued_at),
            "comment": self.comment,
        }

    @classmethod
    def from_json(cls, data: object) -> Certificate:
        if not isinstance(data, dict) or data.get("schema") != CERT_SCHEMA:
            raise LicenseInvalid(f"certificate: expected a {CERT_SCHEMA} object")
        pub = decode_public(data.get("public_key"), "certificate.public_key")
        if data.get("keyid") != key_id(pub):
            raise LicenseInvalid("certificate: keyid does not match its public key")
        try:
            purpose = KeyPurpose(data.get("purpose"))
        except ValueError:
            raise LicenseInvalid(f"certificate: unknown purpose {data.get('purpose')!r}") from None
        return cls(
            keyid=key_id(pub),
            public_key=encode_public(pub),
            not_before=from_iso(data.get("not_before"), "certificate.not_before"),
            not_after=from_iso(data.get("not_after"), "certificate.not_after"),
            purpose=purpose,
            issued_at=from_iso(data.get("issued_at"), "certificate.issued_at"),
            comment=str(data.get("comment", "")),
        )


def certify(root: Ed25519PrivateKey, cert: Certificate) -> dsse.Envelope:
    """The vendor's act: the root signs `cert` (run where the root's private key lives)."""
    return dsse.sign(
        CERT_TYPE,
        json.dumps(cert.to_json(), sort_keys=True).encode(),
        {key_id(root.public_key()): root},
    )


def parse_certificate(data: object) -> tuple[dsse.Envelope, Certificate]:
    """A certificate envelope (as JSON data) and its claims, unverified; LicenseInvalid if not."""
    try:
        envelope = dsse.Envelope.from_json(data)
        if envelope.payload_type != CERT_TYPE:
            raise LicenseInvalid(f"not a key certificate: payload type {envelope.payload_type!r}")
        return envelope, Certificate.from_json(envelope.payload_json())
    except IntegrityError as err:
        raise LicenseInvalid(f"certificate: {err}") from None


def verify_certificate(data: object, keyring: Keyring) -> TrustedKey:
    """The signing key a certificate vouches for, if a shipped, unrevoked root signed it.

    The root must itself be valid when the certificate was issued; the key's window is the
    certificate's.  SignatureInvalid names the reason otherwise.
    """
    envelope, cert = parse_certificate(data)
    roots = {r.keyid: r for r in keyring.roots if keyring.revocation(r.keyid) is None}
    try:
        root_id = dsse.verify(envelope, {k: r.public_key for k, r in roots.items()})
    except IntegrityError as err:
        raise SignatureInvalid(
            f"key {cert.keyid} is not certified by a vendor root of this release: {err}"
        ) from None
    if not roots[root_id].valid_at(cert.issued_at):
        raise SignatureInvalid(
            f"key {cert.keyid}: its certificate was issued {to_iso(cert.issued_at)}, outside "
            f"root {root_id}'s window ({roots[root_id].window()})"
        )
    return TrustedKey(
        keyid=cert.keyid,
        public_key=decode_public(cert.public_key),
        not_before=cert.not_before,
        not_after=cert.not_after,
        production=True,
        comment=cert.comment,
        certified_by=root_id,
    )


def with_certificates(keyring: Keyring, certificates: tuple[object, ...]) -> Keyring:
    """`keyring` plus the signing keys of every certificate that verifies against its roots.

    A certificate that does not verify is skipped here (it names no key the keyring would
    accept anyway); `license trust` verifies before it stores one and says why it refuses.
    """
    extra = []
    for data in certificates:
        try:
            extra.append(verify_certificate(data, keyring))
        except (LicenseInvalid, SignatureInvalid):
            continue
    return keyring.merged(Keyring(tuple(extra)), prefer_other=True)
