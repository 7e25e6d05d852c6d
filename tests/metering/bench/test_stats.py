"""Statistics: percentiles, spread, and the paired bootstrap's interval."""

from __future__ import annotations

import numpy as np
import pytest

from luminal.metering.bench import stats


def test_arm_stats_from_raw_runs() -> None:
    blocks = [[100, 200, 300], [400, 500]]
    s = stats.arm_stats(blocks, batch=4)
    runs = np.array([100, 200, 300, 400, 500])
    assert (s.runs, s.blocks, s.min_ns, s.mean_ns) == (5, 2, 100.0, 300.0)
    assert s.p50_ns == 300.0 and s.p90_ns == pytest.approx(np.percentile(runs, 90))
    assert s.p99_ns == pytest.approx(496.0)
    assert s.throughput == pytest.approx(4 * 5 / 1500e-9)  # items per second of run time
    means = np.array([200.0, 450.0])
    assert s.cv == pytest.approx(means.std(ddof=1) / means.mean())


def test_ratio_of_medians_is_deterministic_and_brackets_its_point() -> None:
    rng = np.random.default_rng(3)
    base = 2.0 * np.exp(rng.normal(0, 0.05, 40))
    cand = 1.0 * np.exp(rng.normal(0, 0.05, 40))
    a = stats.ratio_of_medians(base, cand, seed=7, resamples=2000)
    b = stats.ratio_of_medians(base, cand, seed=7, resamples=2000)
    assert a == b
    assert a.point == pytest.approx(np.median(base) / np.median(cand))
    assert a.lower < a.point < a.upper
    assert 1.8 < a.lower and a.upper < 2.2


def test_bootstrap_interval_covers_the_true_ratio() -> None:
    """Synthetic paired blocks: true medians 3.0 ms and 2.0 ms (ratio 1.5), independent
    per-arm noise plus machine noise that hits both arms of a round alike."""
    true_ratio = 1.5
    covered = 0
    trials = 120
    for t in range(trials):
        rng = np.random.default_rng(1000 + t)
        n = 40
        machine = np.exp(rng.normal(0, 0.15, n))  # shared by both arms of a round
        base = 3.0e6 * machine * np.exp(rng.normal(0, 0.05, n))
        cand = 2.0e6 * machine * np.exp(rng.normal(0, 0.05, n))
        r = stats.ratio_of_medians(base, cand, seed=t, resamples=1000)
        covered += r.lower <= true_ratio <= r.upper
    # 95% nominal; the percentile bootstrap of a median is a little conservative or liberal
    # at n=40, so accept anything from 88%.
    assert covered / trials >= 0.88


def test_pairing_cancels_shared_noise() -> None:
    rng = np.random.default_rng(5)
    machine = np.exp(rng.normal(0, 0.3, 30))  # big round-to-round drift
    r = stats.ratio_of_medians(2.0 * machine, 1.0 * machine, seed=0, resamples=1000)
    assert r.lower == pytest.approx(2.0) and r.upper == pytest.approx(2.0)


def test_median_ratio() -> None:
    assert stats.median_ratio([[20, 20], [22]], [[10], [10, 11]]) == pytest.approx(2.0)
