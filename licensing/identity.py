"""The install identity: an Ed25519 key pair and a machine fingerprint, made on first use.

The key signs activation requests, improvement reports and usage exports; a bound license
names its key id and fingerprint.  Both files live in `$LUMINAL_HOME` with mode 0600.  The
fingerprint is recorded when the identity is made (SHA-256 of the CPU fingerprint and the
OS machine id), so a later hardware change does not silently change the identity.
"""

from __future__ import annotations

import hashlib
import json
import platform
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from luminal.errors import LicenseInvalid
from luminal.licensing import dsse
from luminal.licensing.home import Home, create_exclusive
from luminal.licensing.keys import encode_public, key_id, load_private, private_pem
from luminal.licensing.timeutil import to_iso, utcnow

_MACHINE_ID_FILES = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))


def machine_fingerprint(root: Path = Path("/")) -> str:
    """32 hex digits identifying this machine: CPU (arch, model, SIMD) and OS machine id."""
    from luminal.compiler.hardware import detect_cpu

    machine_id = ""
    for path in _MACHINE_ID_FILES:
        try:
            machine_id = (root / path.relative_to("/")).read_text().strip()
            break
        except OSError:
            continue
    text = "|".join(("luminal-machine-v1", detect_cpu(root).fingerprint, machine_id))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class InstallIdentity:
    private_key: Ed25519PrivateKey
    fingerprint: str
    created_at: str

    @property
    def public_key(self) -> Ed25519PublicKey:
        return self.private_key.public_key()

    @property
    def keyid(self) -> str:
        return key_id(self.public_key)

    def public_json(self) -> dict[str, str]:
        return {
            "keyid": self.keyid,
            "public_key": encode_public(self.public_key),
            "fingerprint": self.fingerprint,
            "created_at": self.created_at,
            "host": platform.node(),
        }

    def sign(self, payload_type: str, payload: bytes) -> dsse.Envelope:
        """A DSSE envelope over `payload`, signed by this install."""
        return dsse.sign(payload_type, payload, {self.keyid: self.private_key})


def load_or_create(home: Home, *, fingerprint: str | None = None) -> InstallIdentity:
    """This install's identity, created (key first, atomically) if it does not exist yet.

    `fingerprint` overrides the detected machine fingerprint when the identity is created
    (tests, or an operator who pins one); an existing identity keeps its own.
    """
    home.ensure()
    if not home.install_key.exists():
        create_exclusive(home.install_key, private_pem(Ed25519PrivateKey.generate()))
    key = load_private(home.install_key)
    try:
        info = json.loads(home.install_info.read_text())
    except FileNotFoundError:
        info = None
    except (OSError, ValueError) as err:
        raise LicenseInvalid(f"{home.install_info}: unreadable install identity ({err})") from None
    if info is None:
        identity = InstallIdentity(key, fingerprint or machine_fingerprint(), to_iso(utcnow()))
        data = (json.dumps(identity.public_json(), indent=2) + "\n").encode()
        if not create_exclusive(home.install_info, data):
            return load_or_create(home)
        return identity
    if info.get("keyid") != key_id(key.public_key()):
        raise LicenseInvalid(
            f"{home.install_info}: key id {info.get('keyid')} does not match {home.install_key}"
        )
    return InstallIdentity(key, str(info["fingerprint"]), str(info.get("created_at", "")))


def existing(home: Home) -> InstallIdentity | None:
    """The identity if one has been made, without making one."""
    if not (home.install_key.exists() and home.install_info.exists()):
        return None
    return load_or_create(home)
