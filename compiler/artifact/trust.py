"""Which keys may sign the artifacts this install runs: its own, and those an operator adds.

An install signs every artifact it builds with its install key (`licensing/identity.py`).
A runtime loads an artifact only when that signature is by a key it trusts:

    this install's key           always (artifacts built here)
    $LUMINAL_HOME/artifact-keys.json
                                 public keys an operator trusts explicitly, one per
                                 build install (`luminal artifact-key trust FILE`)

A key travels as a small JSON *key file* (`luminal artifact-key export` on the build
install): its key id, raw Ed25519 public key (base64) and, for people, the host it came
from.  The key id is the first 16 hex digits of SHA-256 over the raw public key (the same
id the install key has everywhere else), so a key file whose id does not match its key
is refused.

This trust list is separate from the license keyring on purpose: trusting a build
install to run its artifacts says nothing about who may issue licenses.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import platform
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from luminal.errors import IntegrityError, UsageError
from luminal.licensing import identity
from luminal.licensing.home import Home, write_atomic

KEY_FILE_TYPE = "luminal-artifact-key"
STORE_FILE = "artifact-keys.json"
STORE_VERSION = 1


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def key_id(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def _encode(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def _decode(text: object, where: str) -> Ed25519PublicKey:
    try:
        return Ed25519PublicKey.from_public_bytes(base64.b64decode(str(text), validate=True))
    except (binascii.Error, ValueError):
        raise UsageError(f"{where}: 'public_key' is not a base64 Ed25519 public key") from None


@dataclass(frozen=True)
class ArtifactKey:
    """One public key that may sign artifacts, and where it came from (for people)."""

    keyid: str
    public_key: Ed25519PublicKey
    host: str = ""
    added_at: str = ""

    def to_json(self) -> dict[str, str]:
        return {
            "type": KEY_FILE_TYPE,
            "keyid": self.keyid,
            "public_key": _encode(self.public_key),
            "host": self.host,
            "added_at": self.added_at,
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> ArtifactKey:
        if not isinstance(data, dict) or data.get("type") != KEY_FILE_TYPE:
            raise UsageError(
                f"{where}: not an artifact key file (make one with `luminal artifact-key export`)"
            )
        key = _decode(data.get("public_key"), where)
        if data.get("keyid") != key_id(key):
            raise UsageError(f"{where}: key id {data.get('keyid')} does not match its public key")
        return cls(key_id(key), key, str(data.get("host", "")), str(data.get("added_at", "")))


@dataclass(frozen=True)
class TrustStore:
    """The keys one install accepts on artifacts: its own (if it has one) and the added."""

    home: Home
    own: ArtifactKey | None
    added: tuple[ArtifactKey, ...]

    @property
    def path(self) -> Path:
        return self.home.root / STORE_FILE

    @classmethod
    def load(cls, home: Home | None = None) -> TrustStore:
        home = home or Home.resolve()
        ident = identity.existing(home)
        own = None
        if ident is not None:
            own = ArtifactKey(key_id(ident.public_key), ident.public_key, platform.node())
        return cls(home, own, _read_store(home.root / STORE_FILE))

    def keys(self) -> dict[str, Ed25519PublicKey]:
        """key id -> public key, every key this install trusts."""
        out = {k.keyid: k.public_key for k in self.added}
        if self.own is not None:
            out[self.own.keyid] = self.own.public_key
        return out

    def trust(self, key: ArtifactKey) -> tuple[TrustStore, bool]:
        """The store with `key` added and written; False when it was trusted already."""
        if key.keyid in self.keys():
            return self, False
        added = (*self.added, ArtifactKey(key.keyid, key.public_key, key.host, _now()))
        store = TrustStore(self.home, self.own, added)
        store._write()
        return store, True

    def untrust(self, keyid: str) -> TrustStore:
        if self.own is not None and keyid == self.own.keyid:
            raise UsageError(f"key {keyid} is this install's own key; it is always trusted")
        if keyid not in {k.keyid for k in self.added}:
            raise UsageError(f"key {keyid} is not in {self.path}")
        store = TrustStore(self.home, self.own, tuple(k for k in self.added if k.keyid != keyid))
        store._write()
        return store

    def _write(self) -> None:
        self.home.ensure()
        doc = {"version": STORE_VERSION, "keys": [k.to_json() for k in self.added]}
        write_atomic(self.path, (json.dumps(doc, indent=2) + "\n").encode(), mode=0o644)


def own_key(home: Home | None = None) -> ArtifactKey:
    """This install's signing key (made on first use), as a key file others can trust."""
    ident = identity.load_or_create(home or Home.resolve())
    return ArtifactKey(key_id(ident.public_key), ident.public_key, platform.node())


def read_key_file(path: Path) -> ArtifactKey:
    try:
        raw = Path(path).read_bytes()
    except OSError as err:
        raise UsageError(f"key file {path}: cannot read ({err.strerror})") from None
    try:
        data = json.loads(raw[: 64 * 1024])
    except (ValueError, RecursionError):
        raise UsageError(f"key file {path}: not JSON") from None
    return ArtifactKey.from_json(data, f"key file {path}")


def _read_store(path: Path) -> tuple[ArtifactKey, ...]:
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return ()
    except (OSError, ValueError, RecursionError) as err:
        raise IntegrityError(f"{path}: unreadable artifact trust store ({err})") from None
    keys = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(keys, list):
        raise IntegrityError(f"{path}: not an artifact trust store (no 'keys' list)")
    try:
        return tuple(ArtifactKey.from_json(k, str(path)) for k in keys)
    except UsageError as err:
        raise IntegrityError(str(err)) from None
