"""`benchmarks.ab`: two arms through the bench harness with a fake clock, so the paired
speedup and the output check are exact (no timing in a unit test)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.ab import compare, row
from luminal.errors import UsageError
from luminal.metering.bench.method import MethodSettings

FEEDS = {"x": np.arange(6, dtype=np.float32)}


class FakeClock:
    def __init__(self) -> None:
        self.ns = 0

    def __call__(self) -> int:
        return self.ns

    def arm(self, cost_ns: int, offset: float = 0.0):  # type: ignore[no-untyped-def]
        def run(feeds):  # type: ignore[no-untyped-def]
            self.ns += cost_ns
            return {"y": feeds["x"] * 2 + offset}

        return run


def _settings() -> MethodSettings:
    return MethodSettings(duration_s=0.05, min_runs=5, min_blocks=6, block_s=0.001, settle_s=0)


def test_the_speedup_is_the_paired_ratio_of_times() -> None:
    clock = FakeClock()
    c = compare(clock.arm(2_000_000), clock.arm(1_000_000), FEEDS, _settings(), clock=clock)
    assert c.a_ms == pytest.approx(2.0) and c.b_ms == pytest.approx(1.0)
    assert c.speedup.point == pytest.approx(2.0)
    assert c.rounds >= 6 and c.max_abs_diff == 0.0
    assert "2.000x" in row("a.lmnl", "b.lmnl", c)


def test_outputs_that_differ_are_reported() -> None:
    clock = FakeClock()
    c = compare(clock.arm(1000), clock.arm(1000, offset=0.5), FEEDS, _settings(), clock=clock)
    assert c.max_abs_diff == pytest.approx(0.5)


def test_artifacts_with_other_outputs_are_refused() -> None:
    def other(feeds):  # type: ignore[no-untyped-def]
        return {"z": feeds["x"]}

    clock = FakeClock()
    with pytest.raises(UsageError, match="different outputs"):
        compare(clock.arm(1000), other, FEEDS, _settings(), clock=clock)
