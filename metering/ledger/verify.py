"""Is this ledger what its writers wrote?  `verify(path)` -> `LedgerVerdict`.

Records are checked in file order by `Chain`, the same checker the vendor runs on an
export (starting from the last record it accepted).  The first problem found is named:

    MALFORMED    a line that is not a record
    EDITED       a record whose hash is not the hash of its contents, or that differs
                 from what the head sealed
    BROKEN_LINK  a record whose `prev` is not the previous record's hash (one was changed
                 and re-hashed)
    MISSING      a sequence number skipped (a record deleted)
    REORDERED    a record out of sequence that appears later (records swapped)
    TRUNCATED    fewer records than the head seals (the file was cut)
    CLOCK_BACK   a record's wall time earlier than the previous one allows (in one boot:
                 the previous wall time plus the monotonic time elapsed, less
                 `TOLERANCE`; across boots: the previous wall time less `TOLERANCE`)
    NEGATIVE     a negative usage value
    ABSURD       a usage value no device produces (`records.check_body`)

A pending tail (an append cut short by a crash, beyond the head) is reported as
`pending_bytes`, not as a problem.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from luminal.metering.ledger.records import (
    GENESIS,
    BadValue,
    Malformed,
    Record,
    Stamp,
    check_body,
    leaf_hash,
    loads,
)
from luminal.metering.ledger.store import Head, Ledger, Scan

#: Clock corrections smaller than this are NTP's, not a clock set back.
TOLERANCE_NS = 5 * 60 * 10**9


class Finding(Enum):
    MALFORMED = "malformed"
    EDITED = "edited"
    BROKEN_LINK = "broken-link"
    MISSING = "missing"
    REORDERED = "reordered"
    TRUNCATED = "truncated"
    CLOCK_BACK = "clock-back"
    NEGATIVE = "negative"
    ABSURD = "absurd"


@dataclass(frozen=True)
class Problem:
    seq: int  # the record named (its position for MALFORMED, the first absent for MISSING)
    finding: Finding
    message: str

    def to_json(self) -> dict[str, object]:
        return {"record": self.seq, "finding": self.finding.value, "message": self.message}


@dataclass(frozen=True)
class LedgerVerdict:
    path: Path
    records: int  # whole records that verify, from the first
    problem: Problem | None
    pending_bytes: int  # an unsealed tail (an append cut short): pending, not tampering
    sealed: int  # records the head seals

    @property
    def ok(self) -> bool:
        return self.problem is None

    def to_json(self) -> dict[str, object]:
        return {
            "ledger": str(self.path),
            "ok": self.ok,
            "records": self.records,
            "sealed": self.sealed,
            "pending_bytes": self.pending_bytes,
            "problem": self.problem.to_json() if self.problem else None,
        }


class Chain:
    """Checks records one by one, continuing from (`seq`, `prev`, `stamp`)."""

    def __init__(self, seq: int = 0, prev: str = GENESIS, stamp: Stamp | None = None) -> None:
        self.seq = seq
        self.prev = prev
        self.stamp = stamp

    def check(self, record: Record, later: Sequence[int] = ()) -> Problem | None:
        """The problem with `record` as the next one, or None (and the chain advances).
        `later` are the sequence numbers after it (to tell a swap from a deletion)."""
        r, want = record, self.seq
        if r.seq != want:
            if r.seq > want and want not in later:
                return Problem(
                    want,
                    Finding.MISSING,
                    f"record {want} is missing: record {want - 1} is followed by record {r.seq}",
                )
            return Problem(
                want,
                Finding.REORDERED,
                f"record {want}: found record {r.seq} in its place (records out of order)",
            )
        if leaf_hash(r.leaf()) != r.hash:
            return Problem(
                want,
                Finding.EDITED,
                f"record {want}: its hash does not match its contents (edited)",
            )
        if r.prev != self.prev:
            return Problem(
                want,
                Finding.BROKEN_LINK,
                f"record {want}: its link to record {want - 1} is broken "
                f"(record {want - 1} was changed and re-hashed, or this one)",
            )
        problem = _clock_problem(self.stamp, r)
        if problem is not None:
            return problem
        try:
            check_body(r.kind, r.body)
        except BadValue as err:
            return Problem(
                want,
                Finding.NEGATIVE if err.negative else Finding.ABSURD,
                f"record {want} ({r.kind.value}): {err}",
            )
        self.seq, self.prev, self.stamp = want + 1, r.hash, r.stamp
        return None


def _clock_problem(before: Stamp | None, r: Record) -> Problem | None:
    if before is None:
        return None
    t = r.stamp
    floor = before.wall_ns - TOLERANCE_NS
    if t.boot == before.boot:
        if t.mono_ns < before.mono_ns:
            return Problem(
                r.seq,
                Finding.CLOCK_BACK,
                f"record {r.seq}: its monotonic time is earlier than record {r.seq - 1}'s in "
                "the same boot",
            )
        floor += t.mono_ns - before.mono_ns
    if t.wall_ns < floor:
        back = (floor + TOLERANCE_NS - t.wall_ns) / 1e9
        return Problem(
            r.seq,
            Finding.CLOCK_BACK,
            f"record {r.seq}: the clock was set back {back:.0f} s between record {r.seq - 1} "
            f"and it",
        )
    return None


def verify(path: Path | str | None = None) -> LedgerVerdict:
    """Check a whole ledger (a folder holding `ledger.jsonl`, or the file itself; default
    this install's) and name the first bad record.  What `luminal meter verify` prints."""
    ledger = _ledger(path)
    scan = ledger.scan()
    head = scan.head
    chain = Chain()
    seqs: list[int] = []
    parsed: list[Record] = []
    for k, line in enumerate(scan.lines):
        try:
            parsed.append(loads(line))
        except Malformed as err:
            return _verdict(ledger, k, Problem(k, Finding.MALFORMED, f"record {k}: {err}"), scan)
        seqs.append(parsed[-1].seq)
    for k, record in enumerate(parsed):
        problem = chain.check(record, seqs[k + 1 :])
        if problem is not None:
            return _verdict(ledger, k, problem, scan)
    problem = _head_problem(head, parsed, bool(scan.pending))
    return _verdict(ledger, len(parsed), problem, scan)


def _head_problem(head: Head | None, records: Sequence[Record], pending: bool) -> Problem | None:
    n = len(records)
    if head is None:
        if n:
            return Problem(
                0, Finding.TRUNCATED, "the ledger's head is missing: truncation cannot be ruled out"
            )
        return None
    if head.size < 0:
        return Problem(0, Finding.MALFORMED, "the ledger's head is unreadable")
    if n < head.size:
        cut = "; a partial record follows" if pending else ""
        return Problem(
            n,
            Finding.TRUNCATED,
            f"record {n} is missing: the head seals {head.size} records, the file holds {n} "
            f"(truncated{cut})",
        )
    if head.size and records[head.size - 1].hash != head.hash:
        return Problem(
            head.size - 1,
            Finding.EDITED,
            f"record {head.size - 1}: differs from the one the head sealed (edited)",
        )
    return None


def _verdict(ledger: Ledger, good: int, problem: Problem | None, scan: Scan) -> LedgerVerdict:
    sealed = scan.head.size if scan.head is not None and scan.head.size > 0 else 0
    return LedgerVerdict(ledger.path, good, problem, len(scan.pending), sealed)


def _ledger(path: Path | str | None) -> Ledger:
    if path is None:
        return Ledger.of()
    p = Path(path)
    return Ledger(p.parent) if p.name.endswith(".jsonl") else Ledger(p)


__all__ = ["TOLERANCE_NS", "Chain", "Finding", "LedgerVerdict", "Problem", "verify"]
