"""Statistics: percentiles, spread, and the paired estimator's t-interval."""

from __future__ import annotations

import math

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


@pytest.mark.parametrize(
    ("confidence", "dof", "table"),
    [
        (0.95, 1, 12.706),
        (0.95, 2, 4.303),
        (0.95, 9, 2.262),
        (0.95, 19, 2.093),
        (0.95, 29, 2.045),
        (0.95, 30, 2.042),
        (0.95, 120, 1.980),
        (0.99, 10, 3.169),
        (0.99, 60, 2.660),
        (0.90, 5, 2.015),
    ],
)
def test_t_quantile_matches_the_printed_table(confidence: float, dof: int, table: float) -> None:
    assert stats.t_quantile(confidence, dof) == pytest.approx(table, abs=6e-4)


def test_paired_ratio_is_the_geometric_mean_of_per_pair_ratios() -> None:
    rng = np.random.default_rng(3)
    base = 2.0 * np.exp(rng.normal(0, 0.05, 40))
    cand = 1.0 * np.exp(rng.normal(0, 0.05, 40))
    r = stats.paired_ratio(base, cand)
    logs = np.log(base / cand)
    assert r.point == pytest.approx(math.exp(logs.mean()))
    half = stats.t_quantile(0.95, 39) * logs.std(ddof=1) / math.sqrt(40)
    assert (r.lower, r.upper) == pytest.approx((r.point / math.exp(half), r.point * math.exp(half)))
    assert r.halfwidth == pytest.approx((r.upper - r.lower) / (2 * r.point))
    assert r.pairs == 40 and 1.9 < r.lower < r.point < r.upper < 2.1
    assert stats.paired_ratio(base, cand) == r  # nothing random: verify recomputes it exactly
    swapped = stats.paired_ratio(cand, base)  # swapping the arms inverts the interval
    assert swapped.point == pytest.approx(1 / r.point)
    assert swapped.lower == pytest.approx(1 / r.upper)


def test_interval_covers_the_true_ratio_under_drift_and_noise() -> None:
    """True speedup 1.5; a random walk of machine speed that both arms of a round share,
    plus independent lognormal noise per block.  The t-interval covers about 95%."""
    covered, trials = 0, 400
    for t in range(trials):
        rng = np.random.default_rng(1000 + t)
        n = 30
        machine = np.exp(np.cumsum(rng.normal(0, 0.2, n)))  # drifts far over the run
        base = 3.0e6 * machine * np.exp(rng.normal(0, 0.1, n))
        cand = 2.0e6 * machine * np.exp(rng.normal(0, 0.1, n))
        r = stats.paired_ratio(base, cand)
        covered += r.lower <= 1.5 <= r.upper
    assert 0.92 <= covered / trials <= 0.98


def test_pairing_cancels_shared_drift() -> None:
    rng = np.random.default_rng(5)
    machine = np.exp(rng.normal(0, 0.3, 30))  # big round-to-round drift, both arms alike
    r = stats.paired_ratio(2.0 * machine, 1.0 * machine)
    assert r.point == pytest.approx(2.0) and r.halfwidth == pytest.approx(0.0, abs=1e-12)
    assert stats.cv(2.0 * machine) > 0.2  # which a cap on each arm's spread would reject


def test_paired_blocks_pairs_block_means_round_by_round() -> None:
    r = stats.paired_blocks([[20, 20], [44]], [[10], [20, 24]])
    assert r.point == pytest.approx(2.0) and r.pairs == 2


def test_too_few_pairs_have_no_interval() -> None:
    one = stats.paired_ratio(np.array([2.0]), np.array([1.0]))
    assert one.point == 2.0 and one.halfwidth is None and one.pairs == 1
    assert stats.paired_ratio(np.zeros(0), np.zeros(0)).halfwidth is None
    with pytest.raises(ValueError, match="paired"):
        stats.paired_ratio(np.ones(3), np.ones(2))
