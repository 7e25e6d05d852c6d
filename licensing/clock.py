"""The distrusted clock: remember the latest time this install has seen; refuse rollback.

Every license check records `max(last_seen, now)` in `$LUMINAL_HOME/clock.json`.  A clock
that reads more than `TOLERANCE` earlier than the last time seen is reported as a
rollback (setting the clock back to stretch an expired license).  The tolerance absorbs
ordinary NTP corrections.  Deleting the file forgets the history; the license's own
not-before time is then the only lower bound (see docs/licensing.md).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from luminal.errors import ClockRollback, LuminalError
from luminal.licensing.home import Home, write_atomic
from luminal.licensing.timeutil import aware, from_iso, to_iso, utcnow

TOLERANCE = timedelta(minutes=5)


@dataclass(frozen=True)
class ClockState:
    last_seen: datetime | None

    def to_json(self) -> dict[str, object]:
        return {"last_seen": to_iso(self.last_seen) if self.last_seen else None}


def read(home: Home) -> ClockState:
    """The recorded state; an absent or unreadable file is an empty state."""
    try:
        data = json.loads(home.clock.read_text())
        return ClockState(from_iso(data["last_seen"], "last_seen") if data["last_seen"] else None)
    except (OSError, ValueError, KeyError, TypeError, LuminalError):
        return ClockState(None)


def observe(
    home: Home, now: datetime | None = None, *, tolerance: timedelta = TOLERANCE
) -> datetime:
    """Check `now` (default: the system clock) against the last time seen and record it.

    Raises ClockRollback when `now` is earlier than the last time seen by more than
    `tolerance`; otherwise records the later of the two and returns `now`.
    """
    now = aware(now) if now is not None else utcnow()
    last = read(home).last_seen
    if last is not None and now < last - tolerance:
        raise ClockRollback(
            f"clock rollback: the system clock reads {to_iso(now)}, earlier than the last "
            f"time this install has seen ({to_iso(last)}); correct the system clock"
        )
    latest = now if last is None else max(now, last)
    if latest != last:
        # A home we cannot write (read-only mount) weakens rollback detection but must
        # never stop work that is otherwise licensed.
        with contextlib.suppress(OSError, LuminalError):
            home.ensure()
            write_atomic(home.clock, (json.dumps(ClockState(latest).to_json()) + "\n").encode())
    return now
