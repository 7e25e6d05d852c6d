"""The distrusted clock: remember the latest time this install has seen; refuse rollback.

Every license check records `max(last_seen, now)` in `$LUMINAL_HOME/clock.json`.  A clock
that reads more than `TOLERANCE` earlier than the last time seen is reported as a
rollback (setting the clock back to stretch an expired license).  The tolerance absorbs
ordinary NTP corrections.

A clock that once ran *ahead* (a wrong BIOS date, a VM restored with the host's skew)
leaves a `last_seen` in the future, and every honest check after it looks like a
rollback.  The first such refusal records the *excursion* (how far ahead, when it was
noticed) and prints the way out, which never needs the file deleted:

- a clock reset token: `luminal license clock-reset-request` -> the vendor's
  `luminal-vendor clock-reset` -> `luminal license clock-reset TOKEN` (air-gapped), or
- a fresh activation: a license bound to this install, signed by a root-certified key and
  issued (by the vendor's clock) within `FRESH` of this clock.

Both are the vendor vouching for the current time; `reset()` then replaces `last_seen`.

The same file remembers when this install first saw each license (`first_seen`): that is
how a license from a retired key is told apart from one installed while the key was current
(see `enforce.check_retirement`).  Deleting the file forgets the history; the license's
own dates are then the only bounds (see docs/licensing.md).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from luminal.errors import ClockRollback, LuminalError
from luminal.licensing.home import Home, write_atomic
from luminal.licensing.timeutil import aware, from_iso, to_iso, utcnow

TOLERANCE = timedelta(minutes=5)
#: A vendor-signed time this close to the local clock counts as "now" for a reset.
FRESH = timedelta(days=2)

RECOVERY = (
    "if the clock is right now, it ran ahead earlier: recover with "
    "`luminal license clock-reset-request -o reset-request.json`, send that file to your "
    "vendor (`luminal-vendor clock-reset`), then `luminal license clock-reset TOKEN.json`; "
    "or activate again (`luminal license activate`, or install a freshly issued license)"
)


@dataclass(frozen=True)
class Excursion:
    """The clock ran ahead to `ahead_to`; noticed at `noticed_at` (by the corrected clock)."""

    ahead_to: datetime
    noticed_at: datetime

    def to_json(self) -> dict[str, str]:
        return {"ahead_to": to_iso(self.ahead_to), "noticed_at": to_iso(self.noticed_at)}


@dataclass(frozen=True)
class ClockState:
    last_seen: datetime | None
    excursion: Excursion | None = None
    reset_nonce: str = ""
    #: (sha256 of a license's claims, when this install first saw it)
    seen: tuple[tuple[str, datetime], ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "last_seen": to_iso(self.last_seen) if self.last_seen else None,
            "excursion": self.excursion.to_json() if self.excursion else None,
            "reset_nonce": self.reset_nonce or None,
            "seen": {digest: to_iso(t) for digest, t in self.seen},
        }


def read(home: Home) -> ClockState:
    """The recorded state; an absent or unreadable file is an empty state."""
    try:
        data = json.loads(home.clock.read_text())
        last = from_iso(data["last_seen"], "last_seen") if data["last_seen"] else None
        exc = data.get("excursion")
        excursion = (
            Excursion(from_iso(exc["ahead_to"]), from_iso(exc["noticed_at"])) if exc else None
        )
        seen = tuple((str(k), from_iso(v)) for k, v in dict(data.get("seen") or {}).items())
        return ClockState(last, excursion, str(data.get("reset_nonce") or ""), seen)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError, LuminalError):
        return ClockState(None)


def write(home: Home, state: ClockState) -> None:
    """Record `state`.  A home we cannot write (read-only mount) weakens rollback detection
    but must never stop work that is otherwise licensed."""
    with contextlib.suppress(OSError, LuminalError):
        home.ensure()
        write_atomic(home.clock, (json.dumps(state.to_json()) + "\n").encode())


def observe(
    home: Home, now: datetime | None = None, *, tolerance: timedelta = TOLERANCE
) -> datetime:
    """Check `now` (default: the system clock) against the last time seen and record it.

    Raises ClockRollback when `now` is earlier than the last time seen by more than
    `tolerance` (recording the excursion, and saying how to recover); otherwise records
    the later of the two and returns `now`.
    """
    now = aware(now) if now is not None else utcnow()
    state = read(home)
    last = state.last_seen
    if last is not None and now < last - tolerance:
        if state.excursion is None:
            write(home, replace(state, excursion=Excursion(last, now)))
        raise ClockRollback(
            f"clock rollback: the system clock reads {to_iso(now)}, earlier than the last "
            f"time this install has seen ({to_iso(last)}); correct the system clock; " + RECOVERY
        )
    latest = now if last is None else max(now, last)
    if latest != last:
        write(home, replace(state, last_seen=latest))
    return now


def first_seen(home: Home, digest: str, now: datetime) -> datetime:
    """When this install first saw the license with claims digest `digest` (recording `now`
    if this is the first time)."""
    state = read(home)
    for known, t in state.seen:
        if known == digest:
            return t
    write(home, replace(state, seen=(*state.seen, (digest, now))))
    return now


def set_reset_nonce(home: Home, nonce: str) -> None:
    write(home, replace(read(home), reset_nonce=nonce))


def reset(home: Home, to: datetime) -> ClockState:
    """Replace the last time seen by `to` (a vendor-vouched time); forget the excursion."""
    state = replace(read(home), last_seen=aware(to), excursion=None, reset_nonce="")
    home.ensure()
    write_atomic(home.clock, (json.dumps(state.to_json()) + "\n").encode())
    return state
