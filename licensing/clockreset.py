"""Recovering from a clock excursion: the vendor vouches for the time (air-gapped or not).

    luminal license clock-reset-request -o reset-request.json   # signed by the install key,
                                                                # with a nonce kept in clock.json
    (vendor) luminal-vendor clock-reset reset-request.json -k signing.key -o token.json
    luminal license clock-reset token.json                      # last_seen := the vendor's time

The token names the install and echoes the request's nonce, so it resets this install
once; it must be signed by a root-certified key (a locally trusted evaluation key cannot
vouch for time).  The alternative, `fresh_activation`, takes a newly issued license bound
to this install as the same proof.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import datetime

from luminal.errors import IntegrityError, LicenseInvalid, SignatureInvalid
from luminal.licensing import clock, dsse
from luminal.licensing.chain import verify_certificate
from luminal.licensing.home import Home
from luminal.licensing.identity import InstallIdentity
from luminal.licensing.keys import Keyring, TrustedKey, decode_public, encode_public, key_id
from luminal.licensing.license import LicenseClaims, certificate_text
from luminal.licensing.timeutil import aware, from_iso, to_iso, utcnow

REQUEST_TYPE = "application/vnd.luminal.clock-reset-request+json"
TOKEN_TYPE = "application/vnd.luminal.clock-reset+json"


@dataclass(frozen=True)
class ResetRequest:
    install_keyid: str
    install_public_key: str
    nonce: str
    clock_reads: datetime
    last_seen: datetime | None

    def to_json(self) -> dict[str, object]:
        return {
            "schema": "luminal.clock-reset-request/v1",
            "install_keyid": self.install_keyid,
            "install_public_key": self.install_public_key,
            "nonce": self.nonce,
            "clock_reads": to_iso(self.clock_reads),
            "last_seen": to_iso(self.last_seen) if self.last_seen else None,
        }


@dataclass(frozen=True)
class ResetToken:
    install_keyid: str
    nonce: str
    vendor_time: datetime
    signer_certificate: str = ""

    def to_json(self) -> dict[str, object]:
        cert = (
            {"signer_certificate": json.loads(self.signer_certificate)}
            if self.signer_certificate
            else {}
        )
        return {
            "schema": "luminal.clock-reset/v1",
            "install_keyid": self.install_keyid,
            "nonce": self.nonce,
            "vendor_time": to_iso(self.vendor_time),
            **cert,
        }


def make_request(identity: InstallIdentity, home: Home) -> dsse.Envelope:
    """A signed reset request; its nonce is remembered so only its token applies."""
    state = clock.read(home)
    req = ResetRequest(
        identity.keyid,
        encode_public(identity.public_key),
        secrets.token_hex(16),
        utcnow(),
        state.last_seen,
    )
    clock.set_reset_nonce(home, req.nonce)
    return identity.sign(REQUEST_TYPE, json.dumps(req.to_json(), indent=2).encode())


def read_request(raw: bytes, where: str) -> ResetRequest:
    """The request in `raw`, after checking it is signed by the install key it names."""
    data, envelope = _payload(raw, REQUEST_TYPE, f"clock reset request {where}")
    try:
        pub = decode_public(data.get("install_public_key"), "install_public_key")
        req = ResetRequest(
            install_keyid=str(data["install_keyid"]),
            install_public_key=encode_public(pub),
            nonce=str(data["nonce"]),
            clock_reads=from_iso(data.get("clock_reads"), "clock_reads"),
            last_seen=from_iso(data["last_seen"], "last_seen") if data.get("last_seen") else None,
        )
        dsse.verify(envelope, {key_id(pub): pub})
    except KeyError as err:
        raise LicenseInvalid(f"clock reset request {where}: missing field {err}") from None
    except IntegrityError as err:
        raise SignatureInvalid(f"clock reset request {where}: {err}") from None
    if req.install_keyid != key_id(pub):
        raise LicenseInvalid(f"clock reset request {where}: install_keyid does not match its key")
    return req


def token_payload(req: ResetRequest, now: datetime, certificate: str) -> bytes:
    """What the vendor signs in answer to `req`: the install, its nonce, the vendor's time."""
    token = ResetToken(req.install_keyid, req.nonce, aware(now), certificate)
    return json.dumps(token.to_json(), indent=2, sort_keys=True).encode()


def apply_token(
    raw: bytes, where: str, identity: InstallIdentity, home: Home, keyring: Keyring
) -> datetime:
    """Verify a reset token for this install's pending request; reset the clock record."""
    data, envelope = _payload(raw, TOKEN_TYPE, f"clock reset token {where}")
    try:
        token = ResetToken(
            install_keyid=str(data["install_keyid"]),
            nonce=str(data["nonce"]),
            vendor_time=from_iso(data.get("vendor_time"), "vendor_time"),
            signer_certificate=certificate_text(data.get("signer_certificate")),
        )
    except KeyError as err:
        raise LicenseInvalid(f"clock reset token {where}: missing field {err}") from None
    signer = _certified_signer(envelope, token, keyring, where)
    if not signer.valid_at(token.vendor_time):
        raise SignatureInvalid(
            f"clock reset token {where}: key {signer.keyid} was not valid at "
            f"{to_iso(token.vendor_time)} ({signer.window()})"
        )
    if token.install_keyid != identity.keyid:
        raise SignatureInvalid(
            f"clock reset token {where} is for install {token.install_keyid}, "
            f"this install is {identity.keyid}"
        )
    pending = clock.read(home).reset_nonce
    if not pending or token.nonce != pending:
        raise SignatureInvalid(
            f"clock reset token {where} answers another request (or one already used): run "
            "`luminal license clock-reset-request` and send the new request to the vendor"
        )
    clock.reset(home, token.vendor_time)
    return token.vendor_time


def fresh_activation(
    claims: LicenseClaims,
    signer: TrustedKey,
    identity: InstallIdentity,
    home: Home,
    now: datetime,
) -> bool:
    """Reset the clock record if a new license proves the time; True if it did.

    Proof: bound to this install, signed by a root-certified key, issued (vendor's clock)
    within `clock.FRESH` of this clock.  Only then is a recorded future `last_seen` dropped.
    """
    last = clock.read(home).last_seen
    if last is None or now >= last - clock.TOLERANCE:
        return False
    if not signer.production or claims.binding.install_keyid != identity.keyid:
        return False
    if abs(now - claims.issued_at) > clock.FRESH:
        return False
    clock.reset(home, now)
    return True


def _certified_signer(
    envelope: dsse.Envelope, token: ResetToken, keyring: Keyring, where: str
) -> TrustedKey:
    ring = keyring
    if token.signer_certificate:
        try:
            key = verify_certificate(json.loads(token.signer_certificate), keyring)
            ring = keyring.merged(Keyring((key,)), prefer_other=True)
        except (LicenseInvalid, SignatureInvalid):
            pass
    certified = {k.keyid: k for k in ring.keys if k.production and ring.revocation(k.keyid) is None}
    try:
        keyid = dsse.verify(envelope, {k: v.public_key for k, v in certified.items()})
    except IntegrityError as err:
        raise SignatureInvalid(
            f"clock reset token {where}: not signed by a root-certified vendor key ({err})"
        ) from None
    return certified[keyid]


def _payload(raw: bytes, payload_type: str, what: str) -> tuple[dict[str, object], dsse.Envelope]:
    try:
        envelope = dsse.Envelope.loads(raw)
        data = envelope.payload_json()
    except IntegrityError as err:
        raise LicenseInvalid(f"{what}: {err}") from None
    if envelope.payload_type != payload_type or not isinstance(data, dict):
        raise LicenseInvalid(f"{what}: not a {payload_type} document")
    return data, envelope
