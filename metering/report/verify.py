"""`luminal report verify` (and `luminal-vendor verify-report`): is this report what its
license, its signer and its raw timings say?

1. The envelope is a luminal benchmark Statement (`statement.read`: an activation request,
   a license or anything else is refused).
2. The license verifies through the license gate's chain (`evidence.check_license`), and
   names the key that must have signed: the install key a bound license names (or, for a
   floating license, the key given); the signature must verify with it and the predicate's
   `signer` must name it.
3. The report names that license (id, file digest) and carries exactly its terms (share,
   price per device-hour, currency, evaluation or production): `evidence.check_terms`.
4. Every subject is a digest the predicate records (`evidence.check_subjects`); files given
   (artifact, model, inputs) are hashed and must be the ones measured.
5. `results` is recomputed from the raw data (`metering.bench.results.derive`: statistics
   from every run's timing, bootstrap with the recorded seed, audits, validity, savings)
   and compared with what the report says, number by number (floats to a relative 1e-9).

Any difference is an `IntegrityError` (exit 4) naming the first field that differs.  What
this cannot catch: a report re-derived from rewritten timings and re-signed with the bound
install key itself (the key is on the customer's disk); only a vendor's audit, which
re-runs the bench, can (docs/licensing.md, "Trust model").
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

from luminal.errors import IntegrityError, LicenseError, LuminalError, UsageError
from luminal.licensing import dsse
from luminal.licensing.home import Home, read_file
from luminal.licensing.identity import existing
from luminal.licensing.keys import decode_public, key_id, load_keyring
from luminal.metering.bench.results import derive
from luminal.metering.report.evidence import (
    LicenseFile,
    check_files,
    check_license,
    check_subjects,
    check_terms,
    signer_key,
)
from luminal.metering.report.statement import read

REL_TOL = 1e-9


@dataclass(frozen=True)
class Verified:
    keyid: str
    statement: dict[str, Any]
    compared: int  # derived values recomputed and found equal
    license_id: str
    evaluation: bool  # the license holds the report to evaluation terms

    @property
    def results(self) -> dict[str, Any]:
        return self.statement["predicate"]["results"]


@dataclass(frozen=True)
class Evidence:
    """Files the customer says were measured: re-hashed against the report."""

    files: tuple[Path, ...] = ()  # each must be a subject
    artifact: Path | None = None
    model: Path | None = None
    inputs: Path | None = None
    baseline_options: Path | None = None


def verify(
    path: Path,
    license_file: LicenseFile,
    key: Ed25519PublicKey | None = None,
    evidence: Evidence = Evidence(),
    *,
    default_key: bool = True,
) -> Verified:
    """Every check above, or the IntegrityError naming what differs.  `key`: the signer's
    public key; without one, a floating license is checked against this install's key
    (`default_key`; the vendor passes False and must name the install)."""
    envelope, statement = read(path)
    predicate = statement["predicate"]
    try:
        lic = check_license(license_file)
        if key is None and default_key and lic.claims.binding.mode == "floating":
            key = _install_key()
        signer = signer_key(lic, predicate, key)
    except (IntegrityError, LicenseError) as err:
        raise IntegrityError(f"report {path}: {err}") from None
    except (AttributeError, TypeError) as err:
        raise IntegrityError(f"report {path}: predicate.signer is malformed ({err})") from None
    try:
        keyid = dsse.verify(envelope, {key_id(signer): signer})
    except IntegrityError as err:
        unknown = "unknown key" in str(err)
        why = f" ({'not' if unknown else 'by'} the install the license binds)"
        raise IntegrityError(f"report {path}: {err}{why}") from None
    named = predicate.get("signer")
    if not isinstance(named, dict) or named.get("keyid") != keyid:
        raise IntegrityError(
            f"report {path}: names signer {predicate.get('signer')}, signed by {keyid}"
        )
    try:
        check_terms(lic, predicate)
        subjects = check_subjects(statement)
        check_files(
            predicate,
            artifact=evidence.artifact,
            model=evidence.model,
            inputs=evidence.inputs,
            baseline_options=evidence.baseline_options,
        )
    except IntegrityError as err:
        raise IntegrityError(f"report {path}: {err}") from None
    except (AttributeError, TypeError, KeyError) as err:
        raise IntegrityError(f"report {path}: a predicate field is malformed ({err!r})") from None
    try:
        recomputed = json.loads(json.dumps(derive(predicate)))
    except (LuminalError, KeyError, TypeError, ValueError, IndexError) as err:
        raise IntegrityError(f"report {path}: raw data cannot be re-derived ({err!r})") from None
    diffs: list[str] = []
    compared = _compare(predicate.get("results"), recomputed, "results", diffs)
    if diffs:
        more = f" (and {len(diffs) - 1} more)" if len(diffs) > 1 else ""
        raise IntegrityError(f"report {path}: {diffs[0]}{more}")
    for f in evidence.files:
        digest = hashlib.sha256(read_file(f, "file")).hexdigest()
        if digest not in subjects.values():
            raise IntegrityError(f"report {path}: {f} (sha256 {digest[:16]}...) is not a subject")
    return Verified(keyid, statement, compared, lic.claims.license_id, lic.evaluation)


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


def customer_license(path: Path | None = None) -> LicenseFile:
    """The license a customer checks against: `path`, else the installed one, trusting
    what this install's license gate trusts (shipped roots, local trust)."""
    home = Home.resolve()
    path = path or home.license
    if not path.is_file():
        raise UsageError(
            f"no license at {path} to check the report's terms against: pass --license LICENSE"
        )
    return LicenseFile(read_file(path, "license"), str(path), load_keyring(home.trusted_keys))


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
