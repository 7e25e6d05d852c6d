"""What a usage export must say before the service stores it, and what makes two the same.

A usage export is a DSSE envelope (`application/vnd.luminal.usage+json`) signed by an
activated install; an upload wraps it with a fresh nonce.  Its payload::

    {"version": 1,
     "install_keyid": "<the install that signed it>",
     "created_at": "2026-12-01T10:00:00Z",
     "records": [{"artifact": "sha256:<64 hex>", "device_hours": "12.5"}, ...]}

`device_hours` is the install's running total for that artifact (a decimal string, as
prices are): totals only grow, so an older export replayed later, or an edited one, is
refused where the store compares it with what it holds (`Store.record_usage`, which also
checks that each artifact is one the vendor registered for the licensee).  Two uploads are
the same export when their exports' signed bytes are: `digest` is the SHA-256 of the DSSE
pre-authentication encoding, so re-wrapping an export with a new nonce does not count it
twice.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation

from luminal.errors import LuminalError, UsageError
from luminal.licensing import dsse
from luminal.licensing.timeutil import from_iso
from luminal_vendor.bodies import BodyRejected, Limits, loads

VERSION = 1
#: An artifact is named by the SHA-256 of its `.lmnl` file, as benchmark reports name it.
ARTIFACT = re.compile(r"sha256:[0-9a-f]{64}")
MAX_RECORDS = 1000
#: A century of one device, continuously: more than any real total, less than a typo.
MAX_HOURS = Decimal(100 * 366 * 24)
_FIELDS = {"version", "install_keyid", "created_at", "records"}


class UsageRejected(UsageError):
    """A usage export the service refuses (HTTP 400): malformed, or inconsistent with the
    totals and artifacts on record."""


@dataclass(frozen=True)
class UsageRecord:
    artifact: str  # "sha256:<hex>"
    device_hours: Decimal  # the running total for this install and artifact


@dataclass(frozen=True)
class UsageExport:
    install_keyid: str
    created_at: datetime
    records: tuple[UsageRecord, ...]
    digest: str  # identifies the export across uploads (not the upload's nonce)


def export_digest(envelope: dsse.Envelope) -> str:
    return hashlib.sha256(dsse.pae(envelope.payload_type, envelope.payload)).hexdigest()


def parse_export(envelope: dsse.Envelope, limits: Limits) -> UsageExport:
    """The export's records, or UsageRejected saying which field is wrong."""
    try:
        data = loads(envelope.payload, limits, "usage export")
    except BodyRejected as err:
        raise UsageRejected(err.message) from None
    if not isinstance(data, dict):
        raise UsageRejected(f"usage export must be a JSON object, got {type(data).__name__}")
    missing, extra = _FIELDS - data.keys(), data.keys() - _FIELDS
    if missing or extra:
        raise UsageRejected(
            "usage export: "
            + "; ".join(
                part
                for part in (
                    f"missing {', '.join(sorted(missing))}" if missing else "",
                    f"unknown field(s) {', '.join(sorted(extra))}" if extra else "",
                )
                if part
            )
        )
    if data["version"] != VERSION or isinstance(data["version"], bool):
        raise UsageRejected(f"usage export: version {data['version']!r} (this service reads 1)")
    keyid = data["install_keyid"]
    if not isinstance(keyid, str) or not keyid:
        raise UsageRejected("usage export: install_keyid must be a non-empty string")
    try:
        created = from_iso(data["created_at"], "created_at")
    except LuminalError as err:
        raise UsageRejected(f"usage export: {err}") from None
    records = data["records"]
    if not isinstance(records, list) or not records or len(records) > MAX_RECORDS:
        raise UsageRejected(f"usage export: records must be a list of 1 to {MAX_RECORDS} items")
    parsed = tuple(_record(r, k) for k, r in enumerate(records))
    if len({r.artifact for r in parsed}) != len(parsed):
        raise UsageRejected("usage export: an artifact appears in more than one record")
    return UsageExport(keyid, created, parsed, export_digest(envelope))


def _record(item: object, k: int) -> UsageRecord:
    where = f"usage export: records[{k}]"
    if not isinstance(item, dict) or set(item) != {"artifact", "device_hours"}:
        raise UsageRejected(f"{where} must be an object with artifact and device_hours")
    artifact, hours = item["artifact"], item["device_hours"]
    if not isinstance(artifact, str) or not ARTIFACT.fullmatch(artifact):
        raise UsageRejected(f"{where}.artifact must be 'sha256:' and 64 lowercase hex digits")
    if isinstance(hours, bool) or not isinstance(hours, (str, int)):
        raise UsageRejected(f'{where}.device_hours must be a decimal string, e.g. "12.5"')
    try:
        value = Decimal(str(hours).strip())
    except InvalidOperation:
        raise UsageRejected(f"{where}.device_hours {hours!r} is not a number") from None
    if not value.is_finite() or value < 0 or value > MAX_HOURS:
        raise UsageRejected(f"{where}.device_hours {hours!r} must be between 0 and {MAX_HOURS}")
    return UsageRecord(artifact, value)


__all__ = [
    "ARTIFACT",
    "MAX_HOURS",
    "UsageExport",
    "UsageRecord",
    "UsageRejected",
    "export_digest",
    "parse_export",
]
