"""What a usage export must be before the vendor accepts it, and what it must continue.

A usage export (`luminal.metering.ledger.export`: DSSE `application/vnd.luminal.usage+json`,
version 2) carries an install's new ledger records, a signed checkpoint and a consistency
proof from the previous export's checkpoint.  `parse_export` checks it alone (size and
depth first, as every body the service reads, then signatures, schema, sequence and proof:
`UsageRejected`, HTTP 400).  `check_continues` checks it against what the vendor holds
for that install, the last accepted checkpoint and its records (`LedgerRejected`):

    REPLAY   the same export (by digest: the SHA-256 of its signed bytes) accepted before
    GAP      it starts after the last accepted checkpoint: an export in between is missing
    FORK     it starts before the last accepted checkpoint, or from a different root, or
             its records do not hash to its checkpoint: a ledger restored from an old
             copy, or rewritten
    CHAIN    a record that breaks the chain (edited, out of sequence, clock set back,
             negative or absurd values), named as `luminal meter verify` names it
    LICENSE  a license-installed record whose license is not one the vendor signed for
             this install

Two uploads of one export are the same export: re-wrapping it with a new nonce does not
count it twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from luminal.errors import IntegrityError, LuminalError, UsageError
from luminal.licensing import dsse
from luminal.licensing.enforce import verify_license
from luminal.licensing.keys import Keyring
from luminal.metering.ledger import merkle
from luminal.metering.ledger.export import (
    ExportInvalid,
    UsageExport,
    export_digest,
    read_export,
)
from luminal.metering.ledger.records import Record, RecordKind, canonical
from luminal.metering.ledger.verify import Chain
from luminal_vendor.bodies import BodyRejected, Limits, loads


class UsageRejected(UsageError):
    """A usage export the service refuses (HTTP 400): malformed, or badly signed."""


class Rejection(Enum):
    REPLAY = "replay"
    GAP = "gap"
    FORK = "fork"
    CHAIN = "chain"
    LICENSE = "license"
    ARTIFACT = "unknown-artifact"


class LedgerRejected(IntegrityError):
    """An export that does not continue what the vendor accepted (exit 4, HTTP 409)."""

    def __init__(self, reason: Rejection, message: str) -> None:
        super().__init__(f"usage export rejected ({reason.value}): {message}")
        self.reason = reason


@dataclass(frozen=True)
class Held:
    """What the vendor holds for one install: every accepted record's hash, the last one."""

    leaves: tuple[str, ...]
    last: Record | None

    @property
    def size(self) -> int:
        return len(self.leaves)

    @property
    def root(self) -> str:
        return merkle.root(self.leaves)


def parse_export(envelope: dsse.Envelope, limits: Limits, key: Ed25519PublicKey) -> UsageExport:
    """The export checked alone, or UsageRejected saying which field is wrong."""
    try:
        loads(envelope.payload, limits, "usage export")
    except BodyRejected as err:
        raise UsageRejected(err.message) from None
    try:
        return read_export(envelope, key)
    except ExportInvalid as err:
        raise UsageRejected(str(err)) from None
    except LuminalError as err:
        raise UsageRejected(f"usage export: {err}") from None


def check_continues(export: UsageExport, held: Held) -> None:
    """LedgerRejected unless `export` extends exactly what is held."""
    m, have = export.since_size, held.size
    if m > have:
        raise LedgerRejected(
            Rejection.GAP,
            f"it starts at record {m}, but the records accepted end at {have}: an export in "
            f"between is missing (re-export with `luminal meter export --from {have}`)",
        )
    if m < have:
        raise LedgerRejected(
            Rejection.FORK,
            f"it continues from tree size {m}, but tree size {have} was accepted since: "
            "the ledger was restored from an older copy (a fork)",
        )
    if export.since_root != held.root:
        raise LedgerRejected(
            Rejection.FORK,
            f"its previous checkpoint (root {export.since_root[:16]}) is not the accepted "
            f"one (root {held.root[:16]}): a forked ledger",
        )
    last = held.last
    chain = Chain(m, last.hash, last.stamp) if last is not None else Chain()
    seqs = [r.seq for r in export.records]
    for k, record in enumerate(export.records):
        problem = chain.check(record, seqs[k + 1 :])
        if problem is not None:
            raise LedgerRejected(Rejection.CHAIN, problem.message)
    leaves = held.leaves + tuple(r.hash for r in export.records)
    if merkle.root(leaves) != export.checkpoint.root:
        raise LedgerRejected(Rejection.FORK, "its records do not hash to its checkpoint's root")


def check_licenses(export: UsageExport, keyring: Keyring, install_keyid: str) -> None:
    """Every license-installed record holds a license the vendor's keys signed, bound to
    this install (or floating): the terms a statement bills on are the vendor's."""
    for r in export.records:
        if r.kind is not RecordKind.LICENSE_INSTALLED:
            continue
        raw = canonical(r.body.get("license") or {})
        try:
            claims, _ = verify_license(raw, keyring, f"in record {r.seq}")
        except LuminalError as err:
            raise LedgerRejected(Rejection.LICENSE, str(err)) from None
        b = claims.binding
        if b.mode == "install" and b.install_keyid != install_keyid:
            raise LedgerRejected(
                Rejection.LICENSE,
                f"record {r.seq}: license {claims.license_id} is bound to install "
                f"{b.install_keyid}, not {install_keyid}",
            )


def usage_artifacts(records: Sequence[Record]) -> set[str]:
    return {str(r.body["artifact"]) for r in records if r.kind is RecordKind.USAGE}


__all__ = [
    "Held",
    "LedgerRejected",
    "Rejection",
    "UsageExport",
    "UsageRejected",
    "check_continues",
    "check_licenses",
    "export_digest",
    "parse_export",
    "usage_artifacts",
]
