"""The install identity: an Ed25519 key pair and a machine fingerprint, made on first use.

The key signs activation requests, improvement reports and usage exports; a bound license
names its key id and fingerprint.  Both files live in `$LUMINAL_HOME` with mode 0600.  The
fingerprint (SHA-256 of the CPU fingerprint and the OS machine id) is recorded when the
identity is made, with the parts it was made of, so a later hardware change does not
silently change the identity.

The recorded fingerprint is only a claim about the machine: a whole `$LUMINAL_HOME` copied
to another machine carries it along.  So every license check recomputes the machine's
facts (`machine_facts`, through the hardware probe: `LUMINAL_HARDWARE_ROOT` points it at
another tree) and `enforce` refuses a bound license when they differ, naming which part
changed (`differences`).
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


@dataclass(frozen=True)
class MachineFacts:
    """What the fingerprint is made of: the CPU's fingerprint and the OS machine id."""

    cpu: str
    machine_id: str  # SHA-256 of the OS machine id (16 hex digits): named, never shown raw
    fingerprint: str

    def to_json(self) -> dict[str, str]:
        return {"cpu": self.cpu, "machine_id": self.machine_id}

    @classmethod
    def from_json(cls, data: object, fingerprint: str) -> MachineFacts | None:
        if not isinstance(data, dict):
            return None
        return cls(str(data.get("cpu", "")), str(data.get("machine_id", "")), fingerprint)


def machine_facts(root: Path | None = None) -> MachineFacts:
    """This machine's facts, read now; `root` defaults to the probe's (LUMINAL_HARDWARE_ROOT)."""
    from luminal.compiler.hardware import detect_cpu
    from luminal.compiler.hardware.probe import Probe

    root = Probe.from_env().root if root is None else root
    machine_id = ""
    for path in _MACHINE_ID_FILES:
        try:
            machine_id = (root / path.relative_to("/")).read_text().strip()
            break
        except OSError:
            continue
    cpu = detect_cpu(root).fingerprint
    text = "|".join(("luminal-machine-v1", cpu, machine_id))
    return MachineFacts(
        cpu=cpu,
        machine_id=hashlib.sha256(machine_id.encode()).hexdigest()[:16],
        fingerprint=hashlib.sha256(text.encode()).hexdigest()[:32],
    )


def machine_fingerprint(root: Path | None = None) -> str:
    """32 hex digits identifying this machine: CPU (arch, model, SIMD) and OS machine id."""
    return machine_facts(root).fingerprint


def differences(recorded: MachineFacts | None, current: MachineFacts) -> tuple[str, ...]:
    """What changed between the recorded machine and this one, in words."""
    if recorded is None:
        return (f"machine fingerprint differs (this machine is {current.fingerprint})",)
    out = []
    if recorded.machine_id != current.machine_id:
        out.append(
            f"machine id differs (recorded {recorded.machine_id}, this machine "
            f"{current.machine_id})"
        )
    if recorded.cpu != current.cpu:
        out.append(f"CPU differs (recorded {recorded.cpu}, this machine {current.cpu})")
    return tuple(out) or (f"machine fingerprint differs (this machine is {current.fingerprint})",)


@dataclass(frozen=True)
class InstallIdentity:
    private_key: Ed25519PrivateKey
    fingerprint: str
    created_at: str
    #: The facts the fingerprint was made of, when recorded (None for an older install.json).
    machine: MachineFacts | None = None

    @property
    def public_key(self) -> Ed25519PublicKey:
        return self.private_key.public_key()

    @property
    def keyid(self) -> str:
        return key_id(self.public_key)

    def public_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "keyid": self.keyid,
            "public_key": encode_public(self.public_key),
            "fingerprint": self.fingerprint,
            "created_at": self.created_at,
            "host": platform.node(),
        }
        if self.machine is not None:
            out["machine"] = self.machine.to_json()
        return out

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
        facts = machine_facts()
        pinned = fingerprint is not None and fingerprint != facts.fingerprint
        identity = InstallIdentity(
            key,
            fingerprint or facts.fingerprint,
            to_iso(utcnow()),
            None if pinned else facts,
        )
        data = (json.dumps(identity.public_json(), indent=2) + "\n").encode()
        if not create_exclusive(home.install_info, data):
            return load_or_create(home)
        return identity
    if info.get("keyid") != key_id(key.public_key()):
        raise LicenseInvalid(
            f"{home.install_info}: key id {info.get('keyid')} does not match {home.install_key}"
        )
    fp = str(info["fingerprint"])
    return InstallIdentity(
        key, fp, str(info.get("created_at", "")), MachineFacts.from_json(info.get("machine"), fp)
    )


def existing(home: Home) -> InstallIdentity | None:
    """The identity if one has been made, without making one."""
    if not (home.install_key.exists() and home.install_info.exists()):
        return None
    return load_or_create(home)
