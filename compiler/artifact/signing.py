"""The artifact's signature: a DSSE envelope over the exact bytes of `manifest.json`.

The manifest lists every other member's SHA-256 and size, so one signature over its bytes
covers the whole artifact; the envelope is stored as the member `manifest.sig`, beside the
manifest rather than around it, so tools that read `manifest.json` keep working.  The
payload *is* the manifest's bytes (not a digest of them): a verifier compares bytes and
never re-serializes JSON.

`verify` runs before the manifest is interpreted and before any member is read:

    no signature                 refused ("unsigned")
    signed by an untrusted key   refused, naming the key id and how to trust it
    changed after signing        refused (manifest bytes or signature do not match)
    trusted key, good signature  accepted: this install's own key, or an added one

A caller that opts in (`trust_unsigned`) gets every refusal above as an *unverified*
provenance instead; the hashes, the manifest's bounds and the library's interface are
still checked, so opting in trusts the builder's intent, never a malformed file.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from luminal.compiler.artifact.trust import TrustStore, key_id
from luminal.errors import IntegrityError
from luminal.licensing import dsse, identity
from luminal.licensing.home import Home

PAYLOAD_TYPE = "application/vnd.luminal.artifact-manifest+json"
SIGNATURE = "manifest.sig"
#: What every refusal tells the operator to do about it.
HOW_TO_TRUST = (
    "trust the building install's key with `luminal artifact-key trust KEY.json` (made there "
    "by `luminal artifact-key export`), or run it anyway with --trust-unsigned"
)


class Trust(enum.Enum):
    OWN = "this install"
    TRUSTED = "a trusted key"
    UNVERIFIED = "not verified (trust_unsigned)"


@dataclass(frozen=True)
class Provenance:
    """Who signed an artifact, and why this install accepted it."""

    trust: Trust
    keyid: str | None  # the signer's key id; None when there was no readable signature


@dataclass(frozen=True)
class Signer:
    """The key an install signs its artifacts with."""

    keyid: str
    private_key: Ed25519PrivateKey

    @classmethod
    def for_install(cls, home: Home | None = None) -> Signer:
        """This install's key (`$LUMINAL_HOME`, made on first use)."""
        ident = identity.load_or_create(home or Home.resolve())
        return cls(key_id(ident.public_key), ident.private_key)

    def sign(self, manifest: bytes) -> bytes:
        """The `manifest.sig` member for these manifest bytes."""
        return dsse.sign(PAYLOAD_TYPE, manifest, {self.keyid: self.private_key}).dumps()


def verify(
    where: str,
    manifest: bytes,
    signature: bytes | None,
    store: TrustStore,
    trust_unsigned: bool = False,
) -> Provenance:
    """The provenance of an artifact whose manifest bytes and signature member are given;
    IntegrityError (one line, what to do) unless it verifies or the caller opted in."""
    try:
        return _verify(manifest, signature, store)
    except _Refused as refused:
        if trust_unsigned:
            return Provenance(Trust.UNVERIFIED, refused.keyid)
        raise IntegrityError(f"{where}: {refused.reason}; {refused.hint}") from None


#: What a refusal of an artifact changed after signing says instead: trusting a key
#: would not help.
ALTERED = "it was altered after it was built: recompile it from its model"


class _Refused(Exception):
    def __init__(self, reason: str, keyid: str | None = None, hint: str = HOW_TO_TRUST) -> None:
        super().__init__(reason)
        self.reason = reason
        self.keyid = keyid
        self.hint = hint


def _verify(manifest: bytes, signature: bytes | None, store: TrustStore) -> Provenance:
    if signature is None:
        raise _Refused(f"the artifact is unsigned (no {SIGNATURE})")
    try:
        envelope = dsse.Envelope.loads(signature)
    except IntegrityError as err:
        raise _Refused(f"{SIGNATURE} is not a signature ({err})") from None
    signers = ", ".join(s.keyid for s in envelope.signatures)
    if envelope.payload_type != PAYLOAD_TYPE:
        raise _Refused(f"{SIGNATURE} signs a {envelope.payload_type!r}, not a manifest")
    if envelope.payload != manifest:
        raise _Refused(
            f"manifest.json does not match its signature by key {signers}", signers, ALTERED
        )
    verdict = dsse.check_signatures(envelope, store.keys())
    if verdict.keyid is not None:
        own = store.own is not None and verdict.keyid == store.own.keyid
        return Provenance(Trust.OWN if own else Trust.TRUSTED, verdict.keyid)
    if verdict.failed:
        bad = verdict.failed[0]
        raise _Refused(f"the signature by key {bad} does not verify", bad, ALTERED)
    raise _Refused(f"signed by key {signers}, which this install does not trust", signers)
