"""The fee statement: the synthetic month of docs/metering.md, worked by hand."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from luminal.errors import UsageError
from luminal.metering.ledger.records import GENESIS, Record, RecordKind, Stamp, make
from luminal.metering.usage.statement import Period, build
from tests.helpers.licensing_helpers import Vendor, make_terms

HOUR_NS = 3600 * 10**9
A, B, C, D = ("sha256:" + ch * 64 for ch in "abcd")


def _at(day: str) -> int:
    t = datetime.fromisoformat(day).replace(tzinfo=UTC)
    return int(t.timestamp()) * 10**9


def _chain(items: list[tuple[str, RecordKind, dict[str, Any]]]) -> list[Record]:
    out: list[Record] = []
    prev = GENESIS
    for k, (day, kind, body) in enumerate(items):
        out.append(make(k, prev, Stamp(_at(day), k, "boot"), kind, body))
        prev = out[-1].hash
    return out


def _report(artifact: str, lower: str, device_class: str, valid: bool = True) -> dict[str, Any]:
    return {
        "artifact": artifact,
        "report": hashlib.sha256(artifact.encode()).hexdigest(),
        "speedup_lower": lower,
        "device_class": device_class,
        "license_id": "LIC-1",
        "valid": valid,
    }


def _usage(artifact: str, hours: int) -> dict[str, Any]:
    return {
        "artifact": artifact,
        "device": "dev",
        "calls": hours * 1000,
        "busy_ns": hours * HOUR_NS,
        "window_ns": hours * HOUR_NS,
        "over_entitlement": False,
    }


@pytest.fixture
def month(tmp_path: Path) -> list[Record]:
    """A production license (share 1/3; cpu $0.10/h, h100 $1.50/h) and four artifacts."""
    raw = Vendor.create(tmp_path / "vendor").license_for(None, terms=make_terms(evaluation=False))
    license_body = {"license": json.loads(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    return _chain(
        [
            ("2026-10-20", RecordKind.LICENSE_INSTALLED, license_body),
            ("2026-10-21", RecordKind.REPORT_REGISTERED, _report(A, "2.5", "h100")),
            ("2026-10-21", RecordKind.REPORT_REGISTERED, _report(B, "1.25", "cpu")),
            ("2026-10-21", RecordKind.REPORT_REGISTERED, _report(C, "0.95", "cpu")),
            ("2026-10-31", RecordKind.USAGE, _usage(A, 99)),  # October: not this statement
            ("2026-11-03", RecordKind.USAGE, _usage(A, 250)),
            ("2026-11-04", RecordKind.USAGE, _usage(B, 1000)),
            ("2026-11-10", RecordKind.USAGE, _usage(C, 50)),
            ("2026-11-12", RecordKind.USAGE, _usage(D, 10)),  # no report registered
            ("2026-11-20", RecordKind.USAGE, _usage(A, 150)),
            ("2026-12-01", RecordKind.USAGE, _usage(B, 77)),  # December
        ]
    )


def test_the_synthetic_month_by_hand(month: list[Record]) -> None:
    s = build(month, Period.parse("2026-11"))
    lines = {ln.artifact: ln for ln in s.lines}
    assert s.production and s.share == "1/3" and s.currency == "USD"
    # A: 400 h on h100 at 1.50, lower bound 2.5: 1.50 x (1 - 1/2.5) x 400 = 360.00; fee 1/3
    a = lines[A]
    assert (a.device_hours, a.price_per_hour, a.savings, a.fee) == (
        Decimal(400),
        Decimal("1.50"),
        Decimal("360.00"),
        Decimal("120.00"),
    )
    # B: 1000 h on cpu at 0.10, lower bound 1.25: 0.10 x 0.2 x 1000 = 20.00; fee 6.666.. -> 6.67
    b = lines[B]
    assert (b.device_hours, b.savings, b.fee, b.billed) == (
        Decimal(1000),
        Decimal("20.00"),
        Decimal("6.67"),
        True,
    )
    # C: lower bound 0.95, not above 1: no savings claimed; D: no report
    assert (lines[C].fee, lines[C].billed, lines[C].note) == (
        Decimal("0.00"),
        False,
        "its speedup's lower bound is not above 1",
    )
    assert lines[D].note == "no report registered for this artifact" and not lines[D].billed
    assert s.device_hours == Decimal(1460)
    assert (s.savings, s.fee, s.savings - s.fee) == (
        Decimal("380.00"),
        Decimal("126.67"),
        Decimal("253.33"),
    )
    assert s.to_json()["totals"] == {
        "calls": 1_460_000,
        "device_hours": "1460",
        "savings": "380.00",
        "fee": "126.67",
        "customer_keeps": "253.33",
    }


def test_a_report_registered_after_the_period_is_not_billed_in_it(month: list[Record]) -> None:
    late = _chain(
        [
            ("2026-10-01", RecordKind.USAGE, _usage(A, 1)),
            ("2026-12-02", RecordKind.REPORT_REGISTERED, _report(A, "9", "h100")),
        ]
    )
    assert build(late, Period.parse("2026-10")).lines[0].note == "no license recorded"
    s = build(month, Period.parse("2026-12"))
    assert [ln.artifact for ln in s.lines] == [B] and s.fee == Decimal("0.51")  # 77 h: 1.54/3


@pytest.mark.parametrize("text", ["2026-13", "2026/11", "november"])
def test_a_bad_period_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="expected a month, YYYY-MM"):
        Period.parse(text)
