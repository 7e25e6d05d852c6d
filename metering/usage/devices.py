"""The `devices` entitlement where artifacts run: distinct devices in a window.

A license allows `entitlements.devices` devices.  Each usage record names its device; a
flush counts the distinct devices in this install's usage records of the last `WINDOW`
(and its own).  Over the count, inference goes on (licensing never stops it, as the license docs say of
expiry): the record says `over_entitlement: true`, a warning names the count, and the fee
statement lists the over-entitlement device-hours per artifact.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from luminal.metering.ledger.records import Record, RecordKind

WINDOW_NS = 24 * 3600 * 10**9


@dataclass(frozen=True)
class DeviceUse:
    devices: int  # distinct devices in the window, this one included
    allowed: int | None  # the license's count; None without a license

    @property
    def over(self) -> bool:
        return self.allowed is not None and self.devices > self.allowed

    def warning(self, license_id: str) -> str:
        return (
            f"license {license_id} allows {self.allowed} device(s); {self.devices} ran "
            "artifacts in the last 24 h: inference continues and is recorded as "
            "over-entitlement (see `luminal meter show`)"
        )


def device_use(
    recent: Iterable[Record], device: str, allowed: int | None, now_wall_ns: int
) -> DeviceUse:
    """`recent`: records from the newest back (`store.backwards`); read until the window ends."""
    seen = {device}
    for r in recent:
        if r.stamp.wall_ns < now_wall_ns - WINDOW_NS:
            break
        if r.kind is RecordKind.USAGE:
            seen.add(str(r.body.get("device", "")))
    return DeviceUse(len(seen), allowed)


__all__ = ["WINDOW_NS", "DeviceUse", "device_use"]
