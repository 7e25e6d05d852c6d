"""Activation requests: an install asks the vendor for a license bound to it.

The request is a DSSE envelope (`dsse.REQUEST_TYPE`) signed by the install key it names,
so the vendor knows the requester holds that key.  Its nonce and creation time let the
online service refuse replays; the air-gapped path carries the same file by hand.
"""

from __future__ import annotations

import json
import platform
import secrets
from dataclasses import dataclass
from datetime import datetime

from luminal._version import __version__
from luminal.errors import IntegrityError, LicenseInvalid, SignatureInvalid
from luminal.licensing import dsse
from luminal.licensing.identity import InstallIdentity
from luminal.licensing.keys import decode_public, encode_public, key_id
from luminal.licensing.timeutil import from_iso, to_iso, utcnow

SCHEMA = "luminal.activation-request/v1"


@dataclass(frozen=True)
class ActivationRequest:
    install_keyid: str
    install_public_key: str
    fingerprint: str
    host: str
    created_at: datetime
    nonce: str
    luminal_version: str

    def to_json(self) -> dict[str, object]:
        return {
            "schema": SCHEMA,
            "install_keyid": self.install_keyid,
            "install_public_key": self.install_public_key,
            "fingerprint": self.fingerprint,
            "host": self.host,
            "created_at": to_iso(self.created_at),
            "nonce": self.nonce,
            "luminal_version": self.luminal_version,
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> ActivationRequest:
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise LicenseInvalid(f"activation request {where}: not a {SCHEMA} document")
        try:
            return cls(
                install_keyid=str(data["install_keyid"]),
                install_public_key=str(data["install_public_key"]),
                fingerprint=str(data["fingerprint"]),
                host=str(data.get("host", "")),
                created_at=from_iso(data["created_at"], f"activation request {where}: created_at"),
                nonce=str(data["nonce"]),
                luminal_version=str(data.get("luminal_version", "")),
            )
        except KeyError as err:
            raise LicenseInvalid(f"activation request {where}: missing field {err}") from None


def make_request(identity: InstallIdentity, now: datetime | None = None) -> dsse.Envelope:
    """A fresh request (new nonce) for this install, signed by its key."""
    req = ActivationRequest(
        install_keyid=identity.keyid,
        install_public_key=encode_public(identity.public_key),
        fingerprint=identity.fingerprint,
        host=platform.node(),
        created_at=now or utcnow(),
        nonce=secrets.token_hex(16),
        luminal_version=__version__,
    )
    return identity.sign(dsse.REQUEST_TYPE, json.dumps(req.to_json(), indent=2).encode())


def read_request(envelope: dsse.Envelope, where: str) -> ActivationRequest:
    """The request in `envelope`, after checking it is signed by the key it names."""
    if envelope.payload_type != dsse.REQUEST_TYPE:
        raise LicenseInvalid(
            f"activation request {where}: payload type is {envelope.payload_type!r}"
        )
    try:
        req = ActivationRequest.from_json(envelope.payload_json(), where)
    except IntegrityError as err:
        raise LicenseInvalid(f"activation request {where}: {err}") from None
    pub = decode_public(req.install_public_key, f"activation request {where}: install_public_key")
    if key_id(pub) != req.install_keyid:
        raise LicenseInvalid(f"activation request {where}: install_keyid does not match its key")
    try:
        dsse.verify(envelope, {req.install_keyid: pub})
    except IntegrityError as err:
        raise SignatureInvalid(f"activation request {where}: signature invalid: {err}") from None
    return req


def load_request(raw: bytes, where: str) -> ActivationRequest:
    try:
        envelope = dsse.Envelope.loads(raw)
    except IntegrityError as err:
        raise LicenseInvalid(f"activation request {where}: {err}") from None
    return read_request(envelope, where)
