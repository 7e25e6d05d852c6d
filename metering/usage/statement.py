"""The fee statement for a period: what the customer owes, from ledger records alone.

For each artifact with usage in the period (`usage` records by their wall time, UTC)::

    device_hours = sum(busy_ns) / 3.6e12
    report       = the last report registered for the artifact by the period's end
                   (its speedup lower bound, device class, validity)
    terms        = the last license installed by the period's end (share, currency,
                   price per device-hour for the report's device class)
    savings, fee = licensing.pricing.quote(price, speedup_lower, share, hours=device_hours)

A line is billed when its report is valid with a lower bound above 1, the license has a
price for the device class and it is a production license; otherwise its savings and fee
are 0 and `note` says why.  Totals are sums of the (rounded) lines.  The customer's
`luminal meter show` and the vendor's `luminal-vendor invoice` run this one function on
the same records, so they print the same statement.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Context, Decimal, localcontext
from typing import Any

from luminal.errors import LuminalError, UsageError
from luminal.licensing import dsse
from luminal.licensing.license import LicenseClaims
from luminal.licensing.pricing import PRECISION, quote, round_money
from luminal.metering.ledger.records import Record, RecordKind

_PERIOD = re.compile(r"(\d{4})-(\d{2})")
NS_PER_HOUR = Decimal(3600 * 10**9)


@dataclass(frozen=True)
class Period:
    """A calendar month, UTC: [start, end)."""

    name: str
    start: datetime
    end: datetime

    @classmethod
    def parse(cls, text: str) -> Period:
        m = _PERIOD.fullmatch(text.strip())
        if not m or not 1 <= int(m.group(2)) <= 12:
            raise UsageError(f"--period {text!r}: expected a month, YYYY-MM (e.g. 2026-11)")
        year, month = int(m.group(1)), int(m.group(2))
        start = datetime(year, month, 1, tzinfo=UTC)
        end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
        return cls(f"{year:04d}-{month:02d}", start, end)

    @classmethod
    def containing(cls, t: datetime) -> Period:
        return cls.parse(f"{t.year:04d}-{t.month:02d}")

    def holds(self, wall_ns: int) -> bool:
        return _ns(self.start) <= wall_ns < _ns(self.end)


def _ns(t: datetime) -> int:
    return int((t - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(microseconds=1)) * 1000


@dataclass(frozen=True)
class Line:
    artifact: str
    calls: int
    busy_ns: int
    device_hours: Decimal
    over_entitlement_hours: Decimal
    report: str | None  # sha256 of the report file billed on
    speedup_lower: str | None
    device_class: str | None
    price_per_hour: Decimal | None
    savings: Decimal
    fee: Decimal
    billed: bool
    note: str

    def to_json(self) -> dict[str, Any]:
        return {
            "artifact": self.artifact,
            "calls": self.calls,
            "busy_ns": self.busy_ns,
            "device_hours": str(self.device_hours),
            "over_entitlement_hours": str(self.over_entitlement_hours),
            "report": self.report,
            "speedup_lower": self.speedup_lower,
            "device_class": self.device_class,
            "price_per_hour": None if self.price_per_hour is None else str(self.price_per_hour),
            "savings": str(self.savings),
            "fee": str(self.fee),
            "billed": self.billed,
            "note": self.note,
        }


@dataclass(frozen=True)
class Statement:
    period: Period
    license_id: str | None
    production: bool
    share: str | None
    currency: str
    lines: tuple[Line, ...]

    @property
    def device_hours(self) -> Decimal:
        with localcontext(Context(prec=PRECISION)):
            return sum((ln.device_hours for ln in self.lines), Decimal(0))

    @property
    def savings(self) -> Decimal:
        return sum((ln.savings for ln in self.lines), round_money(Decimal(0), self.currency))

    @property
    def fee(self) -> Decimal:
        return sum((ln.fee for ln in self.lines), round_money(Decimal(0), self.currency))

    def to_json(self) -> dict[str, Any]:
        return {
            "period": self.period.name,
            "license_id": self.license_id,
            "terms": "production" if self.production else "evaluation",
            "share": self.share,
            "currency": self.currency,
            "lines": [ln.to_json() for ln in self.lines],
            "totals": {
                "calls": sum(ln.calls for ln in self.lines),
                "device_hours": str(self.device_hours),
                "savings": str(self.savings),
                "fee": str(self.fee),
                "customer_keeps": str(self.savings - self.fee),
            },
        }


def license_claims(body: dict[str, Any]) -> LicenseClaims:
    """The claims of a license-installed record (verified when it was recorded)."""
    try:
        env = dsse.Envelope.from_json(body.get("license"))
        return LicenseClaims.from_json(env.payload_json())
    except LuminalError as err:
        raise LuminalError(f"license-installed record: {err}") from None


def build(records: Iterable[Record], period: Period) -> Statement:
    """The statement for `period` from a ledger's records (in ledger order)."""
    end = _ns(period.end)
    claims: LicenseClaims | None = None
    reports: dict[str, dict[str, Any]] = {}
    usage: dict[str, list[int]] = {}  # artifact -> [calls, busy, over busy]
    for r in records:
        if r.stamp.wall_ns >= end:
            continue
        if r.kind is RecordKind.LICENSE_INSTALLED:
            claims = license_claims(dict(r.body))
        elif r.kind is RecordKind.REPORT_REGISTERED:
            reports[str(r.body["artifact"])] = dict(r.body)
        elif r.kind is RecordKind.USAGE and period.holds(r.stamp.wall_ns):
            acc = usage.setdefault(str(r.body["artifact"]), [0, 0, 0])
            acc[0] += int(r.body["calls"])
            acc[1] += int(r.body["busy_ns"])
            acc[2] += int(r.body["busy_ns"]) if r.body.get("over_entitlement") else 0
    currency = claims.pricing.currency if claims else "USD"
    production = claims is not None and not claims.evaluation
    lines = tuple(
        _line(a, *usage[a], reports.get(a), claims, production, currency) for a in sorted(usage)
    )
    return Statement(
        period,
        claims.license_id if claims else None,
        production,
        claims.pricing.share if claims else None,
        currency,
        lines,
    )


def _line(
    artifact: str,
    calls: int,
    busy: int,
    over: int,
    report: dict[str, Any] | None,
    claims: LicenseClaims | None,
    production: bool,
    currency: str,
) -> Line:
    with localcontext(Context(prec=PRECISION)):
        hours = Decimal(busy) / NS_PER_HOUR
        over_hours = Decimal(over) / NS_PER_HOUR
    zero = round_money(Decimal(0), currency)
    cls = str(report["device_class"]) if report else None
    price = claims.pricing.price(cls) if claims and cls else None
    base = dict(
        artifact=artifact,
        calls=calls,
        busy_ns=busy,
        device_hours=hours,
        over_entitlement_hours=over_hours,
        report=str(report["report"]) if report else None,
        speedup_lower=str(report["speedup_lower"]) if report else None,
        device_class=cls,
        price_per_hour=price,
    )

    def unbilled(note: str) -> Line:
        return Line(**base, savings=zero, fee=zero, billed=False, note=note)  # type: ignore[arg-type]

    if claims is None:
        return unbilled("no license recorded")
    if report is None:
        return unbilled("no report registered for this artifact")
    if not report.get("valid"):
        return unbilled("its report is INVALID")
    if price is None:
        return unbilled(f"the license has no price for device class {cls}")
    if Decimal(str(report["speedup_lower"])) <= 1:
        return unbilled("its speedup's lower bound is not above 1")
    if not production:
        return unbilled("evaluation license: shown, never billed")
    q = quote(
        price, str(report["speedup_lower"]), claims.pricing.share, hours=hours, currency=currency
    )
    return Line(**base, savings=q.savings, fee=q.fee, billed=True, note="")  # type: ignore[arg-type]


def dumps(statement: Statement) -> str:
    return json.dumps(statement.to_json(), indent=2) + "\n"


__all__ = ["Line", "Period", "Statement", "build", "dumps", "license_claims"]
