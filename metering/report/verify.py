"""`luminal report verify`: the signature, then every derived number recomputed.

1. The envelope's signature must verify with the given public key (default: this install's).
2. The Statement must be a luminal benchmark report; the signer it names must be the key
   that signed; the `inputs` subject must be the digest the predicate records.
3. `results` is recomputed from the raw data (`metering.bench.results.derive`: statistics
   from every run's timing, bootstrap with the recorded seed, audits, validity, savings)
   and compared with what the report says, number by number (floats to a relative 1e-9).
4. Optionally, files (artifact, model, inputs) are hashed and must be among the subjects.

Any difference is an `IntegrityError` (exit 4) naming the first field that differs.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from luminal.errors import IntegrityError, LuminalError, UsageError
from luminal.licensing import dsse
from luminal.licensing.home import Home, read_file
from luminal.licensing.identity import existing
from luminal.licensing.keys import decode_public, key_id
from luminal.metering.bench.results import derive
from luminal.metering.report.statement import read

REL_TOL = 1e-9


@dataclass(frozen=True)
class Verified:
    keyid: str
    statement: dict[str, Any]
    compared: int  # derived values recomputed and found equal

    @property
    def results(self) -> dict[str, Any]:
        return self.statement["predicate"]["results"]


def verify(
    path: Path, key: Ed25519PublicKey | None = None, files: tuple[Path, ...] = ()
) -> Verified:
    envelope, statement = read(path)
    key = key or _install_key()
    try:
        keyid = dsse.verify(envelope, {key_id(key): key})
    except IntegrityError as err:
        raise IntegrityError(f"report {path}: {err} (check --key)") from None
    predicate = statement["predicate"]
    if predicate.get("signer", {}).get("keyid") != keyid:
        raise IntegrityError(
            f"report {path}: names signer {predicate.get('signer')}, signed by {keyid}"
        )
    subjects = {s.get("name"): s.get("digest", {}).get("sha256") for s in statement["subject"]}
    if subjects.get("inputs") != predicate.get("inputs", {}).get("sha256"):
        raise IntegrityError(f"report {path}: the inputs subject differs from predicate.inputs")
    try:
        recomputed = json.loads(json.dumps(derive(predicate)))
    except (LuminalError, KeyError, TypeError, ValueError, IndexError) as err:
        raise IntegrityError(f"report {path}: raw data cannot be re-derived ({err!r})") from None
    diffs: list[str] = []
    compared = _compare(predicate.get("results"), recomputed, "results", diffs)
    if diffs:
        more = f" (and {len(diffs) - 1} more)" if len(diffs) > 1 else ""
        raise IntegrityError(f"report {path}: {diffs[0]}{more}")
    for f in files:
        digest = hashlib.sha256(read_file(f, "file")).hexdigest()
        if digest not in subjects.values():
            raise IntegrityError(f"report {path}: {f} (sha256 {digest[:16]}...) is not a subject")
    return Verified(keyid, statement, compared)


def load_key(text: str) -> Ed25519PublicKey:
    """A public key from `--key`: a file (install.json, a license-style public key JSON, or
    a PEM public key) or the base64 of the raw 32 bytes."""
    path = Path(text)
    if path.is_file():
        raw = read_file(path, "key")
        if raw.lstrip().startswith(b"-----BEGIN"):
            try:
                key = serialization.load_pem_public_key(raw)
            except ValueError as err:
                raise UsageError(f"--key {path}: not a PEM public key ({err})") from None
            if not isinstance(key, Ed25519PublicKey):
                raise UsageError(f"--key {path}: not an Ed25519 public key")
            return key
        try:
            data = json.loads(raw)
            text = data["public_key"] if isinstance(data, dict) else str(data)
        except (ValueError, KeyError):
            text = raw.decode(errors="replace").strip()
    try:
        return decode_public(text.strip(), "--key")
    except LuminalError:
        raise UsageError(f"--key {text!r}: not a public key file or base64 Ed25519 key") from None


def _install_key() -> Ed25519PublicKey:
    identity = existing(Home.resolve())
    if identity is None:
        raise UsageError("this install has no key yet: pass the signer's key with --key")
    return identity.public_key


def _compare(recorded: Any, computed: Any, where: str, diffs: list[str]) -> int:
    if isinstance(computed, dict):
        if not isinstance(recorded, dict) or set(recorded) != set(computed):
            diffs.append(f"{where} has fields {_keys(recorded)}, expected {sorted(computed)}")
            return 0
        return sum(_compare(recorded[k], computed[k], f"{where}.{k}", diffs) for k in computed)
    if isinstance(computed, list):
        if not isinstance(recorded, list) or len(recorded) != len(computed):
            diffs.append(f"{where} differs in length from the recomputed list")
            return 0
        return sum(
            _compare(r, c, f"{where}[{i}]", diffs)
            for i, (r, c) in enumerate(zip(recorded, computed, strict=True))
        )
    same = (
        isinstance(recorded, int | float)
        and not isinstance(recorded, bool)
        and isinstance(computed, int | float)
        and not isinstance(computed, bool)
        and math.isclose(recorded, computed, rel_tol=REL_TOL, abs_tol=1e-12)
    ) or (recorded == computed and type(recorded) is type(computed))
    if not same:
        diffs.append(
            f"{where} is {recorded!r} in the report, {computed!r} recomputed from the raw data"
        )
        return 0
    return 1


def _keys(value: Any) -> list[str] | str:
    return sorted(value) if isinstance(value, dict) else type(value).__name__
