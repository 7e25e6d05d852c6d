"""Times in licensing documents: timezone-aware UTC, written as ISO 8601 with a `Z`."""

from __future__ import annotations

from datetime import UTC, datetime

from luminal.errors import LicenseInvalid


def utcnow() -> datetime:
    return datetime.now(UTC)


def to_iso(t: datetime) -> str:
    """`2025-01-31T12:00:00Z` (seconds precision, UTC)."""
    return t.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def from_iso(text: object, field: str = "time") -> datetime:
    """Parse an ISO 8601 time; a naive one is taken as UTC.  Bad input names the field."""
    if not isinstance(text, str):
        raise LicenseInvalid(f"{field}: expected an ISO 8601 time, got {text!r}")
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise LicenseInvalid(f"{field}: not an ISO 8601 time: {text!r}") from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def aware(t: datetime) -> datetime:
    """`t` as an aware UTC time (a naive one is taken as UTC)."""
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def day(t: datetime) -> str:
    """`2025-01-31` (UTC), for messages."""
    return t.astimezone(UTC).strftime("%Y-%m-%d")
