"""Ed25519 keys, key ids, and the keyring: the vendor roots and the keys a license may be signed by.

A key id is the first 16 hex digits of SHA-256 over the raw 32-byte public key.

The keyring is built from

- the release keyring shipped inside the package (`licensing/keyring.json`): the vendor's
  ROOT public keys, each with a validity window, plus a revocation list.  Roots sign only
  certificates (see `chain`); a signing key is production because a root certified it;
- the local trust file (`$LUMINAL_HOME/trusted-keys.json`, written by `luminal license
  trust`): root certificates of signing keys (verified against the roots each time they are
  read), evaluation keys trusted by explicit local setting (`--evaluation`: never
  production, and they only ever yield evaluation licenses), and local revocations, which
  apply to shipped keys too (a vendor can ask an air-gapped site to revoke a key before an
  upgrade).

A key is accepted for a license whose `issued_at` lies in the key's window, so rotating a
key does not invalidate the licenses it signed; a revoked key invalidates all of them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field, replace
from datetime import datetime
from importlib import resources
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from luminal.errors import LicenseInvalid, UsageError
from luminal.licensing.home import write_atomic
from luminal.licensing.timeutil import from_iso, to_iso


def raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(key: Ed25519PublicKey) -> str:
    return hashlib.sha256(raw_public(key)).hexdigest()[:16]


def encode_public(key: Ed25519PublicKey) -> str:
    return base64.b64encode(raw_public(key)).decode()


def decode_public(text: object, field: str = "public_key") -> Ed25519PublicKey:
    try:
        raw = base64.b64decode(str(text), validate=True)
        return Ed25519PublicKey.from_public_bytes(raw)
    except (binascii.Error, ValueError):
        raise LicenseInvalid(f"{field}: not a base64 Ed25519 public key") from None


def private_pem(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def load_private(path: Path) -> Ed25519PrivateKey:
    """An Ed25519 private key from a PEM file (exit 2 if missing or not such a key)."""
    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except FileNotFoundError:
        raise UsageError(f"signing key {path}: no such file") from None
    except (OSError, ValueError, TypeError) as err:
        raise UsageError(f"signing key {path}: not a PEM private key ({err})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UsageError(f"signing key {path}: not an Ed25519 key")
    return key


@dataclass(frozen=True)
class TrustedKey:
    """A public key allowed to sign licenses issued within [not_before, not_after)."""

    keyid: str
    public_key: Ed25519PublicKey
    not_before: datetime | None = None
    not_after: datetime | None = None
    production: bool = True
    comment: str = ""
    #: The root that certified this key ("" for a root or a locally trusted evaluation key).
    certified_by: str = ""

    def valid_at(self, t: datetime) -> bool:
        return (self.not_before is None or t >= self.not_before) and (
            self.not_after is None or t < self.not_after
        )

    def window(self) -> str:
        lo = to_iso(self.not_before) if self.not_before else "-inf"
        hi = to_iso(self.not_after) if self.not_after else "+inf"
        return f"{lo} .. {hi}"

    def to_json(self) -> dict[str, object]:
        return {
            "keyid": self.keyid,
            "public_key": encode_public(self.public_key),
            "not_before": to_iso(self.not_before) if self.not_before else None,
            "not_after": to_iso(self.not_after) if self.not_after else None,
            "production": self.production,
            "comment": self.comment,
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> TrustedKey:
        if not isinstance(data, dict):
            raise LicenseInvalid(f"{where}: a key entry must be an object")
        pub = decode_public(data.get("public_key"), f"{where}: public_key")
        keyid = key_id(pub)
        if data.get("keyid", keyid) != keyid:
            raise LicenseInvalid(f"{where}: keyid {data.get('keyid')} does not match its key")
        nb, na = data.get("not_before"), data.get("not_after")
        return cls(
            keyid=keyid,
            public_key=pub,
            not_before=from_iso(nb, f"{where}: not_before") if nb else None,
            not_after=from_iso(na, f"{where}: not_after") if na else None,
            production=bool(data.get("production", True)),
            comment=str(data.get("comment", "")),
        )


@dataclass(frozen=True)
class Revocation:
    keyid: str
    revoked_at: str = ""
    reason: str = ""

    def to_json(self) -> dict[str, str]:
        return {"keyid": self.keyid, "revoked_at": self.revoked_at, "reason": self.reason}


@dataclass(frozen=True)
class Keyring:
    """Signing keys (`keys`), vendor roots, revocations, and stored certificates (JSON text).

    `keys` holds only keys that may sign licenses: root-certified ones (production) and
    locally trusted evaluation ones.  `certificates` is what the local trust file stores;
    `chain.with_certificates` turns the ones that verify into `keys`.
    """

    keys: tuple[TrustedKey, ...] = ()
    revoked: tuple[Revocation, ...] = field(default=())
    roots: tuple[TrustedKey, ...] = ()
    certificates: tuple[str, ...] = ()

    def get(self, keyid: str) -> TrustedKey | None:
        return next((k for k in self.keys if k.keyid == keyid), None)

    def revocation(self, keyid: str) -> Revocation | None:
        return next((r for r in self.revoked if r.keyid == keyid), None)

    def public_keys(self) -> dict[str, Ed25519PublicKey]:
        """Key id -> public key of every key that is not revoked."""
        return {k.keyid: k.public_key for k in self.keys if self.revocation(k.keyid) is None}

    def merged(self, other: Keyring, *, prefer_other: bool = False) -> Keyring:
        """Both rings; on a key id in both, this ring's key wins unless `prefer_other`."""
        if prefer_other:
            theirs = {k.keyid for k in other.keys}
            keys = tuple(k for k in self.keys if k.keyid not in theirs) + other.keys
        else:
            known = {k.keyid for k in self.keys}
            keys = self.keys + tuple(k for k in other.keys if k.keyid not in known)
        return Keyring(
            keys=keys,
            revoked=self.revoked + other.revoked,
            roots=self.roots + tuple(r for r in other.roots if r not in self.roots),
            certificates=self.certificates
            + tuple(c for c in other.certificates if c not in self.certificates),
        )

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "version": 1,
            "keys": [k.to_json() for k in self.keys],
            "revoked": [r.to_json() for r in self.revoked],
            "certificates": [json.loads(c) for c in self.certificates],
        }
        if self.roots:
            out["roots"] = [k.to_json() for k in self.roots]
        return out

    @classmethod
    def from_json(cls, data: object, where: str, *, shipped: bool) -> Keyring:
        """A keyring file.  Only the shipped one may hold roots; its keys are roots.

        In a local file, `keys` are evaluation keys (never production, whatever the file
        says) and `roots` are ignored: a customer cannot add a root.
        """
        if not isinstance(data, dict) or not all(
            isinstance(data.get(k, []), list) for k in ("keys", "roots", "revoked", "certificates")
        ):
            raise LicenseInvalid(f"{where}: expected {{'keys': [...], 'revoked': [...]}}")

        def entries(name: str) -> tuple[TrustedKey, ...]:
            return tuple(
                replace(TrustedKey.from_json(k, f"{where} {name} {i}"), production=shipped)
                for i, k in enumerate(data.get(name, []))
            )

        revoked = tuple(
            Revocation(str(r["keyid"]), str(r.get("revoked_at", "")), str(r.get("reason", "")))
            for r in data.get("revoked", [])
            if isinstance(r, dict) and "keyid" in r
        )
        if shipped:
            return cls(roots=entries("roots"), revoked=revoked)
        certs = tuple(json.dumps(c, sort_keys=True) for c in data.get("certificates", []))
        return cls(keys=entries("keys"), revoked=revoked, certificates=certs)


def shipped_keyring() -> Keyring:
    """The release keyring inside the package: the vendor's root public keys."""
    text = resources.files("luminal.licensing").joinpath("keyring.json").read_text()
    return Keyring.from_json(json.loads(text), "shipped keyring", shipped=True)


def local_keyring(path: Path) -> Keyring:
    """Keys, certificates and revocations of the local trust file; empty if it is absent."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return Keyring()
    except (OSError, ValueError, RecursionError) as err:
        raise LicenseInvalid(f"{path}: unreadable trusted-keys file ({err})") from None
    return Keyring.from_json(data, str(path), shipped=False)


def load_keyring(trusted_keys_file: Path) -> Keyring:
    """The shipped roots, the local trust setting, and the keys its certificates certify."""
    from luminal.licensing.chain import with_certificates

    ring = shipped_keyring().merged(local_keyring(trusted_keys_file))
    return with_certificates(ring, tuple(json.loads(c) for c in ring.certificates))


def _write(path: Path, ring: Keyring) -> Keyring:
    write_atomic(path, (json.dumps(ring.to_json(), indent=2) + "\n").encode())
    return ring


def trust_locally(path: Path, key: TrustedKey) -> Keyring:
    """Add `key` as an evaluation key (never production) to the local trust file."""
    ring = local_keyring(path)
    keys = tuple(k for k in ring.keys if k.keyid != key.keyid)
    return _write(path, replace(ring, keys=(*keys, replace(key, production=False))))


def store_certificate(path: Path, certificate: object) -> Keyring:
    """Add a root certificate (verified by the caller) to the local trust file."""
    ring = local_keyring(path)
    text = json.dumps(certificate, sort_keys=True)
    if text in ring.certificates:
        return ring
    return _write(path, replace(ring, certificates=(*ring.certificates, text)))


def revoke_locally(path: Path, revocation: Revocation) -> Keyring:
    """Add `revocation` to the local trust file (it applies to shipped keys as well)."""
    ring = local_keyring(path)
    revoked = tuple(r for r in ring.revoked if r.keyid != revocation.keyid)
    return _write(path, replace(ring, revoked=(*revoked, revocation)))


def public_key_file(key: TrustedKey) -> bytes:
    """The `.pub.json` a vendor hands out for a key (what `trust` reads)."""
    return (json.dumps(key.to_json(), indent=2) + "\n").encode()


def read_public_key_file(path: Path) -> TrustedKey:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"public key {path}: no such file") from None
    except (OSError, ValueError) as err:
        raise UsageError(f"public key {path}: not a JSON key file ({err})") from None
    return TrustedKey.from_json(data, f"public key {path}")
