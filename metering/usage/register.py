"""Records that tie usage to what it is billed on: a report registered, a license installed.

`luminal bench` registers each report it signs (`metering.report.sign_and_write`): one
`report-registered` record per artifact the report measured, with the figures the fee
statement needs (the speedup's lower bound, the device class, validity) and the SHA-256
of the report file, so the vendor can ask for that file and verify it
(`luminal-vendor verify-report`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from luminal.metering.ledger.records import Record, RecordKind
from luminal.metering.ledger.store import Ledger


def report_bodies(statement: Mapping[str, Any], report_bytes: bytes) -> list[dict[str, Any]]:
    """The `report-registered` bodies for a signed report (none if it measured nothing)."""
    predicate = statement["predicate"]
    results = predicate.get("results") or {}
    speedup = results.get("speedup")
    if not speedup:
        return []
    pricing = predicate.get("pricing") or {}
    lic = predicate.get("license") or {}
    digest = hashlib.sha256(report_bytes).hexdigest()
    return [
        {
            "artifact": "sha256:" + s["digest"]["sha256"],
            "report": digest,
            "speedup_lower": repr(float(speedup["lower"])),
            "device_class": str(pricing.get("device_class") or "cpu"),
            "license_id": lic.get("id"),
            "valid": bool((results.get("validity") or {}).get("valid")),
        }
        for s in statement.get("subject", [])
        if str(s.get("name", "")).startswith("artifact:")
    ]


def register_report(
    ledger: Ledger, statement: Mapping[str, Any], report_bytes: bytes
) -> list[Record]:
    bodies = report_bodies(statement, report_bytes)
    return ledger.append_many([(RecordKind.REPORT_REGISTERED, b) for b in bodies])


__all__ = ["register_report", "report_bodies"]
