#!/usr/bin/env python3
"""Verify an offline bundle before anything from it is installed (run by install.sh).

Standard library only: on the target machine neither luminal nor `cryptography` is
installed yet, and nothing from the bundle may run before it is verified, so the Ed25519
check is done here in pure Python (RFC 8032, section 5.1.7; verification only, no secret
is handled, so constant time does not matter).

    keyring.json          vendor ROOT public keys (or --keyring FILE: an out-of-band copy)
        | certifies (DSSE, key-certificate)
    signer.cert.json      the vendor signing key, its window
        | signs (DSSE, bundle-sums)
    SHA256SUMS.dsse.json  envelope whose payload is exactly the bytes of SHA256SUMS
    SHA256SUMS            sha256 of every other file of the bundle; no file may be unlisted

    python3 verify_bundle.py BUNDLE_DIR [--keyring FILE]

Exit 0 when everything verifies; otherwise one line on stderr naming the file or field at
fault, and exit 4 (luminal's integrity code), 2 for bad usage.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from datetime import datetime
from pathlib import Path

CERT_TYPE = "application/vnd.luminal.key-certificate+json"
SUMS_TYPE = "application/vnd.luminal.bundle-sums+json"
SUMS, ENVELOPE, CERT, KEYRING, MANIFEST = (
    "SHA256SUMS",
    "SHA256SUMS.dsse.json",
    "signer.cert.json",
    "keyring.json",
    "bundle.json",
)
#: The purpose a vendor root certifies signing keys for (licensing/chain.py KeyPurpose).
SIGNING_PURPOSE = "license-signing"
#: Files that SHA256SUMS cannot list (itself and its signature).
UNLISTED = (SUMS, ENVELOPE)


class BundleInvalid(Exception):
    """The bundle does not verify; the message names the file or field."""


# ---- Ed25519 verification (RFC 8032) -------------------------------------------------

_P = 2**255 - 19
_L = 2**252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)


def _add(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, int, int, int]:
    x1, y1, z1, t1 = a
    x2, y2, z2, t2 = b
    aa = (y1 - x1) * (y2 - x2) % _P
    bb = (y1 + x1) * (y2 + x2) % _P
    cc = 2 * t1 * t2 * _D % _P
    dd = 2 * z1 * z2 % _P
    e, f, g, h = bb - aa, dd - cc, dd + cc, bb + aa
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _mul(s: int, point: tuple[int, ...]) -> tuple[int, ...]:
    q: tuple[int, ...] = (0, 1, 1, 0)
    while s > 0:
        if s & 1:
            q = _add(q, point)
        point = _add(point, point)
        s >>= 1
    return q


def _equal(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return (a[0] * b[2] - b[0] * a[2]) % _P == 0 and (a[1] * b[2] - b[1] * a[2]) % _P == 0


def _recover_x(y: int, sign: int) -> int | None:
    if y >= _P:
        return None
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P) % _P
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P != 0:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P != 0:
        return None
    if (x & 1) != sign:
        x = _P - x
    return x


def _decode_point(raw: bytes) -> tuple[int, ...] | None:
    if len(raw) != 32:
        return None
    y = int.from_bytes(raw, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    x = _recover_x(y, sign)
    return None if x is None else (x, y, 1, x * y % _P)


_GY = 4 * pow(5, _P - 2, _P) % _P
_G = (_recover_x(_GY, 0) or 0, _GY, 1, (_recover_x(_GY, 0) or 0) * _GY % _P)


def ed25519_verify(public: bytes, message: bytes, signature: bytes) -> bool:
    """Whether `signature` is `public`'s Ed25519 signature of `message`."""
    if len(signature) != 64:
        return False
    a = _decode_point(public)
    r = _decode_point(signature[:32])
    s = int.from_bytes(signature[32:], "little")
    if a is None or r is None or s >= _L:
        return False
    h = int.from_bytes(hashlib.sha512(signature[:32] + public + message).digest(), "little") % _L
    return _equal(_mul(s, _G), _add(r, _mul(h, a)))


# ---- DSSE and the chain ------------------------------------------------------------------


def pae(payload_type: str, payload: bytes) -> bytes:
    t = payload_type.encode()
    return b"DSSEv1 %d %b %d %b" % (len(t), t, len(payload), payload)


def key_id(public: bytes) -> str:
    return hashlib.sha256(public).hexdigest()[:16]


def _b64(value: object, where: str) -> bytes:
    try:
        return base64.b64decode(str(value), validate=True)
    except ValueError:
        raise BundleInvalid(f"{where}: not valid base64") from None


def _json(path: Path) -> object:
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        raise BundleInvalid(f"{path.name}: missing") from None
    except (OSError, ValueError) as err:
        raise BundleInvalid(f"{path.name}: not JSON ({err})") from None


def _time(value: object, where: str) -> datetime:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise BundleInvalid(f"{where}: not an ISO time") from None


def open_envelope(
    data: object, payload_type: str, trusted: dict[str, bytes], where: str
) -> tuple[bytes, str]:
    """(payload, signer key id) of a DSSE envelope signed by one of `trusted`."""
    if not isinstance(data, dict) or data.get("payloadType") != payload_type:
        raise BundleInvalid(f"{where}: not a DSSE envelope of type {payload_type}")
    payload = _b64(data.get("payload"), f"{where}: payload")
    message = pae(payload_type, payload)
    sigs = data.get("signatures")
    if not isinstance(sigs, list) or not sigs:
        raise BundleInvalid(f"{where}: no signatures")
    for s in sigs:
        if not isinstance(s, dict):
            continue
        public = trusted.get(str(s.get("keyid")))
        if public is None:
            continue
        if ed25519_verify(public, message, _b64(s.get("sig"), f"{where}: sig")):
            return payload, str(s.get("keyid"))
        raise BundleInvalid(
            f"{where}: signature by key {s.get('keyid')} does not verify: changed after signing"
        )
    ids = ", ".join(str(s.get("keyid")) for s in sigs if isinstance(s, dict))
    raise BundleInvalid(f"{where}: signed by {ids}, not a trusted key")


def roots(keyring: object, where: str) -> dict[str, tuple[bytes, datetime | None, datetime | None]]:
    if not isinstance(keyring, dict) or not isinstance(keyring.get("roots"), list):
        raise BundleInvalid(f"{where}: not a release keyring (no roots)")
    revoked = {str(r.get("keyid")) for r in keyring.get("revoked", []) if isinstance(r, dict)}
    out = {}
    for r in keyring["roots"]:
        public = _b64(r.get("public_key"), f"{where}: root public_key")
        kid = key_id(public)
        if kid in revoked:
            continue
        lo, hi = r.get("not_before"), r.get("not_after")
        out[kid] = (
            public,
            _time(lo, f"{where}: not_before") if lo else None,
            _time(hi, f"{where}: not_after") if hi else None,
        )
    if not out:
        raise BundleInvalid(f"{where}: no unrevoked root key")
    return out


def _inside(t: datetime, lo: datetime | None, hi: datetime | None) -> bool:
    return (lo is None or t >= lo) and (hi is None or t < hi)


def verify(bundle: Path, keyring_file: Path | None = None) -> dict[str, object]:
    """Check the chain, the signature over SHA256SUMS and every file's sum; what it found."""
    ring_path = keyring_file or bundle / KEYRING
    ring = roots(_json(ring_path), ring_path.name)
    cert_payload, root_id = open_envelope(
        _json(bundle / CERT), CERT_TYPE, {k: v[0] for k, v in ring.items()}, CERT
    )
    try:
        cert = json.loads(cert_payload)
    except ValueError:
        raise BundleInvalid(f"{CERT}: payload is not JSON") from None
    if not isinstance(cert, dict) or cert.get("purpose") != SIGNING_PURPOSE:
        raise BundleInvalid(f"{CERT}: not a certificate of a vendor signing key")
    signer_public = _b64(cert.get("public_key"), f"{CERT}: public_key")
    if cert.get("keyid") != key_id(signer_public):
        raise BundleInvalid(f"{CERT}: keyid does not match its public key")
    issued = _time(cert.get("issued_at"), f"{CERT}: issued_at")
    if not _inside(issued, ring[root_id][1], ring[root_id][2]):
        raise BundleInvalid(f"{CERT}: issued outside root {root_id}'s window")
    try:
        sums_signed, signer = open_envelope(
            _json(bundle / ENVELOPE), SUMS_TYPE, {str(cert["keyid"]): signer_public}, ENVELOPE
        )
        sums = (bundle / SUMS).read_bytes()
    except FileNotFoundError:
        raise BundleInvalid(f"{SUMS}: missing") from None
    if sums_signed != sums:
        raise BundleInvalid(f"{SUMS}: differs from the signed copy in {ENVELOPE}")
    listed = {}
    for n, line in enumerate(sums.decode().splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64 or not name or name.startswith("/") or ".." in name:
            raise BundleInvalid(f"{SUMS} line {n}: expected 'SHA256  RELATIVE-PATH'")
        listed[name] = digest
    present = {
        p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file() or p.is_symlink()
    }
    unlisted = sorted(present - set(listed) - set(UNLISTED))
    if unlisted:
        raise BundleInvalid(f"{unlisted[0]}: not listed in {SUMS} (added after signing?)")
    for name, digest in sorted(listed.items()):
        path = bundle / name
        if path.is_symlink() or not path.is_file():
            raise BundleInvalid(f"{name}: listed in {SUMS} but missing")
        if sha256_file(path) != digest:
            raise BundleInvalid(f"{name}: sha256 differs from {SUMS} (altered?)")
    manifest = _json(bundle / MANIFEST)
    created = _time(manifest.get("created") if isinstance(manifest, dict) else None, MANIFEST)
    lo, hi = _time(cert.get("not_before"), CERT), _time(cert.get("not_after"), CERT)
    if not _inside(created, lo, hi):
        raise BundleInvalid(f"{MANIFEST}: created {created} outside the signing key's window")
    return {
        "root": root_id,
        "signer": signer,
        "files": len(listed),
        "manifest": manifest,
        "keyring": str(ring_path),
    }


def sha256_file(path: Path) -> str:
    """The file's SHA-256 (hex), read in 1 MiB blocks; `luminal bundle` writes SHA256SUMS
    with this same function."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main(argv: list[str]) -> int:
    args = list(argv)
    keyring = None
    if "--keyring" in args:
        i = args.index("--keyring")
        if i + 1 >= len(args):
            print("verify_bundle: --keyring needs a FILE", file=sys.stderr)
            return 2
        keyring = Path(args[i + 1])
        del args[i : i + 2]
    if len(args) != 1:
        print("usage: verify_bundle.py BUNDLE_DIR [--keyring FILE]", file=sys.stderr)
        return 2
    try:
        found = verify(Path(args[0]), keyring)
    except BundleInvalid as err:
        print(f"bundle INVALID: {err}", file=sys.stderr)
        return 4
    m = found["manifest"]
    print(
        f"bundle OK: {found['files']} files; SHA256SUMS signed by {found['signer']}, certified "
        f"by vendor root {found['root']} ({found['keyring']}); luminal {m.get('luminal')} "
        f"for {m.get('platform')}, Python {m.get('python')}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
