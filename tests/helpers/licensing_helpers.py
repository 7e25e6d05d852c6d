"""Shared pieces for the licensing tests: a test vendor, terms, the vendor CLI, a server."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from typer.testing import CliRunner

from luminal.licensing import dsse
from luminal.licensing.chain import Certificate, KeyPurpose, certify, with_certificates
from luminal.licensing.home import Home
from luminal.licensing.identity import InstallIdentity
from luminal.licensing.keys import (
    Keyring,
    Revocation,
    TrustedKey,
    encode_public,
    private_pem,
    public_key_file,
)
from luminal.licensing.license import (
    Binding,
    Entitlements,
    Licensee,
    Metering,
    Pricing,
    certificate_text,
)
from luminal.licensing.request import make_request, read_request
from luminal.licensing.timeutil import utcnow
from luminal_vendor.cli import app as vendor_app
from luminal_vendor.issuer import Signer, Terms, bind_to, issue


def make_terms(
    *,
    licensee: str = "acme",
    targets: tuple[str, ...] = ("cpu",),
    features: tuple[str, ...] = ("compile", "bench", "report", "meter"),
    devices: int = 2,
    days: int = 365,
    grace_days: int = 14,
    evaluation: bool = True,
) -> Terms:
    return Terms(
        licensee=Licensee(licensee, f"{licensee.upper()} Corp"),
        entitlements=Entitlements(targets, devices, features),
        pricing=Pricing("1/3", "USD", (("cpu", Decimal("0.10")), ("h100", Decimal("1.50")))),
        metering=Metering(),
        days=days,
        grace_days=grace_days,
        evaluation=evaluation,
    )


@dataclass
class Vendor:
    """A test vendor: its own ROOT, and a signing key in `folder` that the root certified
    (vendor.key + vendor.pub.json + vendor.cert.json, as keygen and certify write them).

    Installs trust the root only where a test says so (`release_keyring()`, or the
    `vendor_root` fixture, which stands it in for the shipped keyring); elsewhere the key
    is trusted by local evaluation setting, as before the chain existed.
    """

    folder: Path
    signer: Signer
    public: TrustedKey
    root: Ed25519PrivateKey
    root_public: TrustedKey

    @classmethod
    def create(
        cls,
        folder: Path,
        name: str = "vendor",
        *,
        not_before: datetime | None = None,
        not_after: datetime | None = None,
    ) -> Vendor:
        folder.mkdir(parents=True, exist_ok=True)
        key = Ed25519PrivateKey.generate()
        root = Ed25519PrivateKey.generate()
        now = utcnow()
        lo = not_before or now - timedelta(days=30)
        hi = not_after or now + timedelta(days=3650)
        public = Signer(key).public(not_before=lo, not_after=hi)
        root_public = Signer(root).public(
            not_before=now - timedelta(days=3650), not_after=now + timedelta(days=3650)
        )
        cert = Certificate(
            public.keyid,
            encode_public(key.public_key()),
            lo,
            hi,
            KeyPurpose.LICENSE_SIGNING,
            lo,
        )
        envelope = certify(root, cert)
        (folder / f"{name}.key").write_bytes(private_pem(key))
        (folder / f"{name}.key").chmod(0o600)
        (folder / f"{name}.pub.json").write_bytes(public_key_file(public))
        (folder / f"{name}.cert.json").write_bytes(envelope.dumps())
        signer = Signer(key, certificate_text(envelope.to_json()))
        return cls(
            folder, signer, replace(public, certified_by=root_public.keyid), root, root_public
        )

    @property
    def cert_path(self) -> Path:
        return self.folder / "vendor.cert.json"

    def release_keyring(self) -> Keyring:
        """What a release shipping this vendor's root would hold."""
        return Keyring(roots=(self.root_public,))

    @property
    def key_path(self) -> Path:
        return self.folder / "vendor.key"

    @property
    def pub_path(self) -> Path:
        return self.folder / "vendor.pub.json"

    def keyring(self, *, production: bool = True, revoked: bool = False) -> Keyring:
        """The root (production: licenses carry the key's certificate), or the signing key
        alone as a locally trusted evaluation key."""
        revs = (Revocation(self.public.keyid, "2025-06-01", "test compromise"),) if revoked else ()
        if production:
            ring = Keyring(revoked=revs, roots=(self.root_public,))
            return with_certificates(ring, (json.loads(self.cert_path.read_bytes()),))
        return Keyring((replace(self.public, production=False, certified_by=""),), revs)

    def license_for(
        self,
        identity: InstallIdentity | None,
        terms: Terms | None = None,
        *,
        now: datetime | None = None,
        not_before: datetime | None = None,
        expires_at: datetime | None = None,
    ) -> bytes:
        """Signed license bytes, bound to `identity` (floating when None)."""
        binding = (
            bind_to(read_request(make_request(identity), "test"))
            if identity is not None
            else Binding("floating")
        )
        _, env = issue(
            terms or make_terms(),
            self.signer,
            binding,
            now=now,
            not_before=not_before,
            expires_at=expires_at,
        )
        return env.dumps()

    def write_license(self, path: Path, identity: InstallIdentity | None, **kw: object) -> Path:
        path.write_bytes(self.license_for(identity, **kw))  # type: ignore[arg-type]
        return path


def other_identity(fingerprint: str = "f" * 32) -> InstallIdentity:
    return InstallIdentity(Ed25519PrivateKey.generate(), fingerprint, "2025-01-01T00:00:00Z")


def change_one_byte(raw: bytes) -> bytes:
    """Flip one base64 character in the middle of the payload (decodes to other bytes)."""
    data = json.loads(raw)
    payload = data["payload"]
    i = len(payload) // 2
    swapped = "B" if payload[i] != "B" else "C"
    start = raw.index(payload.encode())
    pos = start + i
    return raw[:pos] + swapped.encode() + raw[pos + 1 :]


def tamper_claims(raw: bytes, **changes: object) -> bytes:
    """Change claims and keep the old signature (what a customer editing the JSON gets)."""
    env = dsse.Envelope.loads(raw)
    claims = json.loads(env.payload)
    claims.update(changes)
    return dsse.Envelope(env.payload_type, json.dumps(claims).encode(), env.signatures).dumps()


def vendor_cli(*args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(vendor_app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def vendor_server(
    signing_key: Path, db: Path, *extra: str, startup_timeout: float = 20.0
) -> Iterator[str]:
    """`luminal-vendor serve` on 127.0.0.1 and a free port; yields its base URL."""
    exe = Path(sys.executable).parent / "luminal-vendor"
    port = free_port()
    cmd = [str(exe), "serve", "-k", str(signing_key), "--db", f"sqlite:///{db}"]
    cmd += ["--host", "127.0.0.1", "--port", str(port), *extra]
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if proc.poll() is not None:
                out = proc.stdout.read().decode() if proc.stdout else ""
                raise RuntimeError(f"luminal-vendor serve exited {proc.returncode}: {out}")
            try:
                if httpx.get(f"{url}/v1/health", timeout=1.0, trust_env=False).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("luminal-vendor serve did not start in time")
            time.sleep(0.1)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def home() -> Home:
    return Home.resolve()
