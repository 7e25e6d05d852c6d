"""The usage ledger: append-only, hash-chained records under a Merkle tree.

    records   a record's fields, kinds, bytes, hash, and the bounds on its values
    store     the file on disk: locked appends from many processes, the head that seals it
    verify    check a ledger, naming the first bad record (`verify(path) -> LedgerVerdict`)
    merkle    RFC 9162 tree hashes and consistency proofs
    export    the signed usage export: new records, a checkpoint, a consistency proof

`verify` is the one function other tools call to judge a ledger (`luminal meter verify`,
`luminal doctor`).
"""

from luminal.metering.ledger.records import Record, RecordKind, Stamp
from luminal.metering.ledger.store import Ledger
from luminal.metering.ledger.verify import Finding, LedgerVerdict, Problem, verify

__all__ = [
    "Finding",
    "Ledger",
    "LedgerVerdict",
    "Problem",
    "Record",
    "RecordKind",
    "Stamp",
    "verify",
]
