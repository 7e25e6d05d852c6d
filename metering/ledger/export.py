"""The usage export: new ledger records, a signed checkpoint, and a consistency proof.

A DSSE envelope (`application/vnd.luminal.usage+json`) signed by the install key::

    {"version": 2,
     "install_keyid": "<the install>", "created_at": "2026-12-01T10:00:00Z",
     "since": {"tree_size": m, "root": "<Merkle root of records 0..m-1>"},
     "records": [<record m>, ..., <record n-1>],
     "checkpoint": <DSSE envelope, application/vnd.luminal.ledger-checkpoint+json:
                    {"install_keyid", "tree_size": n, "root", "created_at"}>,
     "consistency": ["<hex>", ...]}          RFC 9162 PROOF(m, D[n])

`since` is the checkpoint of the previous export (`--since-last`; tree size 0 and the
empty root for the first), so each export proves it extends the one before.  An export's
`digest` is the SHA-256 of its pre-authentication encoding: re-wrapping it for upload does
not make it another export.  `read_export` checks everything one export can show alone
(signatures, schema, records in sequence, the proof); the vendor then checks it against
the last checkpoint it accepted (vendor/luminal_vendor/usage.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from luminal.errors import IntegrityError, LuminalError
from luminal.licensing import dsse
from luminal.licensing.identity import InstallIdentity
from luminal.licensing.keys import key_id
from luminal.licensing.timeutil import from_iso, to_iso, utcnow
from luminal.metering.ledger import merkle
from luminal.metering.ledger.records import Malformed, Record, RecordKind, parse
from luminal.metering.ledger.store import Ledger
from luminal.metering.ledger.verify import verify

VERSION = 2
_FIELDS = {
    "version",
    "install_keyid",
    "created_at",
    "since",
    "records",
    "checkpoint",
    "consistency",
}


class ExportInvalid(IntegrityError):
    """A usage export that does not verify on its own (names the field or record)."""


@dataclass(frozen=True)
class Checkpoint:
    """A signed tree head: the ledger's first `tree_size` records have Merkle root `root`."""

    install_keyid: str
    tree_size: int
    root: str
    created_at: datetime

    def to_json(self) -> dict[str, object]:
        return {
            "install_keyid": self.install_keyid,
            "tree_size": self.tree_size,
            "root": self.root,
            "created_at": to_iso(self.created_at),
        }


@dataclass(frozen=True)
class UsageExport:
    install_keyid: str
    created_at: datetime
    since_size: int
    since_root: str
    records: tuple[Record, ...]
    checkpoint: Checkpoint
    consistency: tuple[str, ...]
    digest: str  # the SHA-256 of the export's signed bytes


def export_digest(envelope: dsse.Envelope) -> str:
    return hashlib.sha256(dsse.pae(envelope.payload_type, envelope.payload)).hexdigest()


def last_export_size(records: tuple[Record, ...]) -> int:
    """The tree size the last export made covered (0 if none)."""
    for r in reversed(records):
        if r.kind is RecordKind.EXPORT_MADE:
            return int(r.body["tree_size"])
    return 0


def make_export(
    ledger: Ledger, identity: InstallIdentity, since: int | None = None
) -> tuple[dsse.Envelope, UsageExport]:
    """Export the records after `since` (default: the last export's end), sign it, and
    record the export in the ledger.  A ledger that does not verify is not exported."""
    verdict = verify(ledger.folder)
    if verdict.problem is not None:
        raise IntegrityError(
            f"ledger {ledger.path}: {verdict.problem.message}; not exported "
            "(`luminal meter verify` says more)"
        )
    records = ledger.records()
    m = last_export_size(records) if since is None else since
    if not 0 <= m <= len(records):
        raise ExportInvalid(f"--from {m}: the ledger holds {len(records)} records")
    envelope = sign_export(records, m, identity)
    export = read_export(envelope, identity.public_key)
    ledger.append(
        RecordKind.EXPORT_MADE,
        {
            "tree_size": export.checkpoint.tree_size,
            "root": export.checkpoint.root,
            "digest": export.digest,
        },
    )
    return envelope, export


def sign_export(records: Sequence[Record], since: int, identity: InstallIdentity) -> dsse.Envelope:
    """The export of `records[since:]` (all `records` for the tree), signed; unchecked."""
    leaves = [r.hash for r in records]
    now = utcnow()
    checkpoint = Checkpoint(identity.keyid, len(records), merkle.root(leaves), now)
    signed = identity.sign(
        dsse.CHECKPOINT_TYPE, json.dumps(checkpoint.to_json(), sort_keys=True).encode()
    )
    payload = {
        "version": VERSION,
        "install_keyid": identity.keyid,
        "created_at": to_iso(now),
        "since": {"tree_size": since, "root": merkle.root(leaves[:since])},
        "records": [r.to_json() for r in records[since:]],
        "checkpoint": signed.to_json(),
        "consistency": merkle.consistency(leaves, since),
    }
    return identity.sign(dsse.USAGE_TYPE, json.dumps(payload, sort_keys=True).encode())


def read_export(
    envelope: dsse.Envelope, key: Ed25519PublicKey, *, max_records: int = 10**7
) -> UsageExport:
    """The export, checked as far as it can be alone; ExportInvalid names what is wrong."""
    keys = {key_id(key): key}
    if envelope.payload_type != dsse.USAGE_TYPE:
        raise ExportInvalid(f"payload type {envelope.payload_type!r} is not a usage export")
    try:
        keyid = dsse.verify(envelope, keys)
    except LuminalError as err:
        raise ExportInvalid(f"usage export: {err}") from None
    data = envelope.payload_json()
    if not isinstance(data, dict):
        raise ExportInvalid("usage export must be a JSON object")
    missing, extra = _FIELDS - data.keys(), data.keys() - _FIELDS
    if missing or extra:
        raise ExportInvalid(
            "usage export: "
            + "; ".join(
                p
                for p in (
                    f"missing {', '.join(sorted(missing))}" if missing else "",
                    f"unknown field(s) {', '.join(sorted(extra))}" if extra else "",
                )
                if p
            )
        )
    if data["version"] != VERSION:
        raise ExportInvalid(f"usage export: version {data['version']!r} (this luminal reads 2)")
    if data["install_keyid"] != keyid:
        raise ExportInvalid(
            f"usage export names install {data['install_keyid']}, signed by {keyid}"
        )
    try:
        created = from_iso(data["created_at"], "created_at")
    except LuminalError as err:
        raise ExportInvalid(f"usage export: {err}") from None
    since = data["since"]
    if not isinstance(since, dict) or not isinstance(since.get("tree_size"), int):
        raise ExportInvalid("usage export: since must be {tree_size, root}")
    m, root_m = since["tree_size"], str(since.get("root", ""))
    raw = data["records"]
    if not isinstance(raw, list) or len(raw) > max_records:
        raise ExportInvalid(f"usage export: records must be a list of at most {max_records}")
    records = []
    for k, item in enumerate(raw):
        try:
            records.append(parse(item))
        except Malformed as err:
            raise ExportInvalid(f"usage export: records[{k}]: {err}") from None
        if records[-1].seq != m + k:
            raise ExportInvalid(
                f"usage export: records[{k}] is record {records[-1].seq}, expected {m + k}"
            )
    checkpoint = _checkpoint(data["checkpoint"], keys, keyid)
    if checkpoint.tree_size != m + len(records):
        raise ExportInvalid(
            f"usage export: the checkpoint covers {checkpoint.tree_size} records, "
            f"the export ends at {m + len(records)}"
        )
    proof = data["consistency"]
    if not isinstance(proof, list) or not all(isinstance(h, str) for h in proof):
        raise ExportInvalid("usage export: consistency must be a list of hashes")
    try:
        consistent = merkle.verify_consistency(
            m, checkpoint.tree_size, root_m, checkpoint.root, proof
        )
    except ValueError:
        consistent = False
    if not consistent:
        raise ExportInvalid(
            f"usage export: the consistency proof from tree size {m} to "
            f"{checkpoint.tree_size} does not verify"
        )
    return UsageExport(
        keyid, created, m, root_m, tuple(records), checkpoint, tuple(proof), export_digest(envelope)
    )


def _checkpoint(data: object, keys: Mapping[str, Ed25519PublicKey], keyid: str) -> Checkpoint:
    try:
        env = dsse.Envelope.from_json(data)
        if env.payload_type != dsse.CHECKPOINT_TYPE:
            raise ExportInvalid(f"checkpoint payload type {env.payload_type!r}")
        dsse.verify(env, keys)
        body = env.payload_json()
        if not isinstance(body, dict) or body.get("install_keyid") != keyid:
            raise ExportInvalid("usage export: the checkpoint is for another install")
        return Checkpoint(
            keyid,
            int(body["tree_size"]),
            str(body["root"]),
            from_iso(body["created_at"], "checkpoint.created_at"),
        )
    except ExportInvalid:
        raise
    except (LuminalError, KeyError, TypeError, ValueError) as err:
        raise ExportInvalid(f"usage export: checkpoint: {err}") from None


__all__ = [
    "VERSION",
    "Checkpoint",
    "ExportInvalid",
    "UsageExport",
    "export_digest",
    "last_export_size",
    "make_export",
    "read_export",
    "sign_export",
]
