"""One ledger record: its fields, its kinds, its bytes and its hash.

    {"seq": 7, "prev": "<hash of record 6>", "wall_ns": ..., "mono_ns": ..., "boot": "<boot id>",
     "kind": "usage", "body": {...}, "hash": "<this record's hash>"}

A record's hash is its Merkle leaf hash (RFC 9162: SHA-256 over 0x00 and the leaf), the
leaf being the record without `hash` as canonical JSON (sorted keys, no spaces, ASCII):
the chain (`prev`) and the tree (`merkle`) use the same 32 bytes.  Record 0's `prev` is
64 zeros.  `wall_ns` is the system clock, `mono_ns` the monotonic clock (nanoseconds; one
boot's monotonic clock is shared by every process), `boot` the kernel's boot id: together
they tell a clock set back from a reboot (`verify`).

Bodies by kind (`RecordKind`):

    usage              artifact, device, calls, busy_ns, window_ns, over_entitlement
    report-registered  artifact, report (sha256 of the file), speedup_lower, device_class,
                       license_id, valid
    license-installed  license (the envelope as JSON), sha256 (of the file's bytes)
    export-made        tree_size, root, digest (of the export's signed bytes)
    vendor-ack         tree_size, root, digest, receipt (what the vendor answered)

`check_body` is what a record's values must satisfy (non-negative, not absurd); the same
function runs in `verify` and on the vendor's side.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

GENESIS = "0" * 64
_HEX64 = re.compile(r"[0-9a-f]{64}")
ARTIFACT = re.compile(r"sha256:[0-9a-f]{64}")
#: More calls in one flush than any device makes in a year.
MAX_CALLS = 10**13
#: A flush window longer than a year is not a window.
MAX_WINDOW_NS = 366 * 24 * 3600 * 10**9
#: Busy device time may exceed the window by this factor (several threads on one device).
MAX_PARALLEL = 64
#: Bodies hold a license envelope at most (a few kB); more is not a record.
MAX_RECORD_BYTES = 256 * 1024


class RecordKind(Enum):
    USAGE = "usage"
    REPORT_REGISTERED = "report-registered"
    LICENSE_INSTALLED = "license-installed"
    EXPORT_MADE = "export-made"
    VENDOR_ACK = "vendor-ack"


class BadValue(ValueError):
    """A record value out of bounds; `negative` says whether it was below zero."""

    def __init__(self, message: str, *, negative: bool) -> None:
        super().__init__(message)
        self.negative = negative


@dataclass(frozen=True)
class Stamp:
    """When a record was appended, by the three clocks a record carries."""

    wall_ns: int
    mono_ns: int
    boot: str


@dataclass(frozen=True)
class Record:
    seq: int
    prev: str
    stamp: Stamp
    kind: RecordKind
    body: Mapping[str, Any]
    hash: str

    def leaf(self) -> dict[str, Any]:
        return leaf_json(self.seq, self.prev, self.stamp, self.kind, self.body)

    def to_json(self) -> dict[str, Any]:
        return {**self.leaf(), "hash": self.hash}

    def line(self) -> bytes:
        return canonical(self.to_json()) + b"\n"


def canonical(data: Mapping[str, Any]) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def leaf_json(
    seq: int, prev: str, stamp: Stamp, kind: RecordKind, body: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        "seq": seq,
        "prev": prev,
        "wall_ns": stamp.wall_ns,
        "mono_ns": stamp.mono_ns,
        "boot": stamp.boot,
        "kind": kind.value,
        "body": dict(body),
    }


def leaf_hash(leaf: Mapping[str, Any]) -> str:
    return hashlib.sha256(b"\x00" + canonical(leaf)).hexdigest()


def make(seq: int, prev: str, stamp: Stamp, kind: RecordKind, body: Mapping[str, Any]) -> Record:
    return Record(
        seq, prev, stamp, kind, dict(body), leaf_hash(leaf_json(seq, prev, stamp, kind, body))
    )


class Malformed(ValueError):
    """A line that is not a record (names the field)."""


def parse(data: object) -> Record:
    """A record from its JSON form, or Malformed naming the field; the hash is not checked."""
    if not isinstance(data, dict):
        raise Malformed("not a JSON object")
    fields = {"seq", "prev", "wall_ns", "mono_ns", "boot", "kind", "body", "hash"}
    if set(data) != fields:
        missing, extra = fields - set(data), set(data) - fields
        raise Malformed(
            "; ".join(
                p
                for p in (
                    f"missing {', '.join(sorted(missing))}" if missing else "",
                    f"unknown field(s) {', '.join(sorted(extra))}" if extra else "",
                )
                if p
            )
        )
    for name in ("seq", "wall_ns", "mono_ns"):
        if not isinstance(data[name], int) or isinstance(data[name], bool) or data[name] < 0:
            raise Malformed(f"{name} must be a non-negative integer")
    for name in ("prev", "hash"):
        if not isinstance(data[name], str) or not _HEX64.fullmatch(data[name]):
            raise Malformed(f"{name} must be 64 lowercase hex digits")
    if not isinstance(data["boot"], str) or not data["boot"]:
        raise Malformed("boot must be a non-empty string")
    try:
        kind = RecordKind(data["kind"])
    except ValueError:
        raise Malformed(f"kind {data['kind']!r} is not a record kind") from None
    if not isinstance(data["body"], dict):
        raise Malformed("body must be an object")
    stamp = Stamp(data["wall_ns"], data["mono_ns"], data["boot"])
    return Record(data["seq"], data["prev"], stamp, kind, data["body"], data["hash"])


def loads(line: bytes) -> Record:
    if len(line) > MAX_RECORD_BYTES:
        raise Malformed(f"{len(line)} bytes, over {MAX_RECORD_BYTES}")
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        raise Malformed("not JSON") from None
    return parse(data)


def _int(body: Mapping[str, Any], name: str, limit: int) -> int:
    value = body.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadValue(f"{name} must be an integer, got {value!r}", negative=False)
    if value < 0:
        raise BadValue(f"{name} {value} is negative", negative=True)
    if value > limit:
        raise BadValue(f"{name} {value} is absurd (over {limit})", negative=False)
    return value


def check_body(kind: RecordKind, body: Mapping[str, Any]) -> None:
    """BadValue when a body's numbers are negative or absurd, or its fields wrong."""
    if kind is RecordKind.USAGE:
        for name in ("artifact", "device"):
            if not isinstance(body.get(name), str) or not body[name]:
                raise BadValue(f"{name} must be a non-empty string", negative=False)
        if not ARTIFACT.fullmatch(body["artifact"]):
            raise BadValue("artifact must be 'sha256:' and 64 hex digits", negative=False)
        _int(body, "calls", MAX_CALLS)
        window = _int(body, "window_ns", MAX_WINDOW_NS)
        busy = _int(body, "busy_ns", MAX_WINDOW_NS * MAX_PARALLEL)
        if busy > max(window, 10**9) * MAX_PARALLEL:
            raise BadValue(
                f"busy_ns {busy} is absurd: more than {MAX_PARALLEL} devices' worth of its "
                f"{window} ns window",
                negative=False,
            )
        if not isinstance(body.get("over_entitlement"), bool):
            raise BadValue("over_entitlement must be true or false", negative=False)
    elif kind is RecordKind.REPORT_REGISTERED:
        if not isinstance(body.get("artifact"), str) or not ARTIFACT.fullmatch(body["artifact"]):
            raise BadValue("artifact must be 'sha256:' and 64 hex digits", negative=False)
        lower = body.get("speedup_lower")
        try:
            value = float(str(lower))
        except ValueError:
            raise BadValue(f"speedup_lower {lower!r} is not a number", negative=False) from None
        if value < 0:
            raise BadValue(f"speedup_lower {lower} is negative", negative=True)
        if not value < 10**6:
            raise BadValue(f"speedup_lower {lower} is absurd", negative=False)
    elif kind in (RecordKind.EXPORT_MADE, RecordKind.VENDOR_ACK):
        _int(body, "tree_size", 10**12)


__all__ = [
    "ARTIFACT",
    "GENESIS",
    "BadValue",
    "Malformed",
    "Record",
    "RecordKind",
    "Stamp",
    "canonical",
    "check_body",
    "leaf_hash",
    "loads",
    "make",
    "parse",
]
