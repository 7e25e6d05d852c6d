"""The distrusted clock: last seen time, rollback, tolerance."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from luminal.errors import ClockRollback
from luminal.licensing import clock

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_clock_moves_forward_and_refuses_rollback(home) -> None:
    assert clock.read(home).last_seen is None
    clock.observe(home, T0)
    clock.observe(home, T0 + timedelta(days=2))
    assert clock.read(home).last_seen == T0 + timedelta(days=2)
    with pytest.raises(
        ClockRollback,
        match=r"clock reads 2026-03-02T12:00:00Z, earlier than the last time this install has seen \(2026-03-03T12:00:00Z\)",
    ):
        clock.observe(home, T0 + timedelta(days=1))
    # a refused reading does not move the record back
    assert clock.read(home).last_seen == T0 + timedelta(days=2)


def test_small_corrections_are_tolerated(home) -> None:
    clock.observe(home, T0)
    clock.observe(home, T0 - timedelta(minutes=2))
    assert clock.read(home).last_seen == T0


def test_garbled_state_is_treated_as_absent(home) -> None:
    home.ensure()
    home.clock.write_text("{oops")
    assert clock.read(home).last_seen is None
    clock.observe(home, T0)
    assert clock.read(home).last_seen == T0
