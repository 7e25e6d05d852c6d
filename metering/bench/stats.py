"""Statistics of a benchmark, all from raw per-run timings (integer nanoseconds).

A *block* is one arm's consecutive runs inside one interleaved round; its *block mean* is
the sum of its run times over its run count.  A *pair* is the two arms' blocks of the same
round.  Everything here is a pure, closed-form function of the raw timings (no random
numbers), so `luminal report verify` recomputes it bit for bit.

- per arm: min, mean, p50, p90, p99 (numpy's linear interpolation over every run), runs,
  blocks, throughput (samples per second over the summed run time) and the coefficient of
  variation of the block means (sample standard deviation / mean), kept as information;
- speedup (`paired_ratio`): the geometric mean of the per-pair ratios
  baseline_block_mean_i / candidate_block_mean_i, with a Student-t interval on their logs.

Why per-pair ratios: the two blocks of a round run back to back, so whatever slows the
machine for longer than a round (another job, thermal or frequency drift) slows both and
cancels in their ratio, where a ratio of per-arm medians keeps it as spread.  Blocks are
sized to last about the same time (`block_s`) for both arms, so a burst of stolen CPU time
costs both arms the same *fraction* of a block: on the log scale, interference is
symmetric and averages out instead of biasing the estimate.

Why a t-interval on the logs rather than a bootstrap: it is closed-form and deterministic
(nothing to seed, exact to recompute), and cheap enough to evaluate after every round, which
the stopping rule (`method.measure`: run until the interval is narrow enough) needs.  The
log makes the ratio symmetric (swapping the arms negates it) and its distribution close to
normal; the pairs are independent rounds, so with the 20-pair floor the t-interval's
coverage is close to nominal (the tests check it under drift and lognormal noise).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist

import numpy as np

Blocks = Sequence[Sequence[int]]  # per block, per run: nanoseconds


@dataclass(frozen=True)
class ArmStats:
    runs: int
    blocks: int
    min_ns: float
    mean_ns: float
    p50_ns: float
    p90_ns: float
    p99_ns: float
    cv: float  # of the block means (information: validity judges the paired interval)
    throughput: float  # samples (batch items) per second of run time

    def to_json(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class Ratio:
    """A ratio of two arms' speeds with its confidence interval.

    `halfwidth` is the interval's relative half-width, (upper - lower) / (2 x point): the
    "+-5%" a reader sees.  It is None (and lower = upper = 0) with fewer than 2 pairs,
    where there is no interval at all."""

    point: float
    lower: float
    upper: float
    confidence: float
    pairs: int
    halfwidth: float | None

    def to_json(self) -> dict[str, float | int | None]:
        return asdict(self)


def block_means(blocks: Blocks) -> np.ndarray:
    """Mean run time of each block, in ns."""
    return np.array([float(np.sum(b, dtype=np.int64)) / len(b) for b in blocks], np.float64)


def block_medians(blocks: Blocks) -> np.ndarray:
    """Median run time of each block, in ns (TEST04's statistic: a cache makes every
    repeated run fast, so the typical run shows it, and a stall of the machine does not)."""
    return np.array([float(np.median(np.asarray(b, np.float64))) for b in blocks], np.float64)


def cv(values: np.ndarray) -> float:
    """Coefficient of variation: sample standard deviation over mean (0 for < 2 values)."""
    if values.size < 2 or float(values.mean()) == 0.0:
        return 0.0
    return float(values.std(ddof=1) / values.mean())


def arm_stats(blocks: Blocks, batch: int) -> ArmStats:
    runs = np.concatenate([np.asarray(b, np.int64) for b in blocks]) if blocks else np.zeros(0)
    if runs.size == 0:
        return ArmStats(0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    total_s = float(runs.sum()) / 1e9
    p50, p90, p99 = (float(v) for v in np.percentile(runs, [50, 90, 99]))
    return ArmStats(
        runs=int(runs.size),
        blocks=len(blocks),
        min_ns=float(runs.min()),
        mean_ns=float(runs.mean()),
        p50_ns=p50,
        p90_ns=p90,
        p99_ns=p99,
        cv=cv(block_means(blocks)),
        throughput=batch * runs.size / total_s if total_s > 0 else 0.0,
    )


def paired_ratio(slow: np.ndarray, fast: np.ndarray, confidence: float = 0.95) -> Ratio:
    """exp(mean(log(slow_i / fast_i))) over paired values (one pair per round), with the
    t-interval exp(mean +- t(confidence, n-1) x sd / sqrt(n)) of the log ratios."""
    if slow.shape != fast.shape or slow.ndim != 1:
        raise ValueError("paired samples must be two 1-D arrays of the same length")
    n = slow.size
    if n == 0:
        return Ratio(0.0, 0.0, 0.0, confidence, 0, None)
    logs = np.log(slow) - np.log(fast)
    mean = float(logs.mean())
    point = math.exp(mean)
    if n < 2:
        return Ratio(point, 0.0, 0.0, confidence, 1, None)
    half = t_quantile(confidence, n - 1) * float(logs.std(ddof=1)) / math.sqrt(n)
    lower, upper = math.exp(mean - half), math.exp(mean + half)
    return Ratio(point, lower, upper, confidence, n, (upper - lower) / (2 * point))


def paired_blocks(slow: Blocks, fast: Blocks, confidence: float = 0.95) -> Ratio:
    """`paired_ratio` of two arms' block means, block i of one paired with block i of the
    other (the same round)."""
    return paired_ratio(block_means(slow), block_means(fast), confidence)


def t_quantile(confidence: float, dof: int) -> float:
    """The two-sided Student-t critical value: P(|T| <= t) = confidence for `dof` degrees
    of freedom.  Exact (the closed-form CDF of Abramowitz & Stegun 26.7.3, inverted by
    bisection) below 30 degrees of freedom; above, the Cornish-Fisher expansion from the
    normal quantile (26.7.5), accurate to better than 1e-7 there."""
    if dof < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {dof}")
    if dof >= 30:
        z = NormalDist().inv_cdf(0.5 + confidence / 2)
        v = float(dof)
        return (
            z
            + (z**3 + z) / (4 * v)
            + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
            + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * v**4)
        )
    lo, hi = 0.0, 1.0
    while _t_central(hi, dof) < confidence:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if _t_central(mid, dof) < confidence else (lo, mid)
    return hi


def _t_central(t: float, dof: int) -> float:
    """P(|T| <= t) for Student's t with integer `dof` (A&S 26.7.3)."""
    theta = math.atan(t / math.sqrt(dof))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if dof % 2:  # odd: (2/pi)(theta + sin cos (1 + 2/3 cos^2 + 2.4/(3.5) cos^4 ...))
        term, total = 1.0, 1.0 if dof > 1 else 0.0
        for k in range(1, (dof - 1) // 2):
            term *= (2 * k) / (2 * k + 1) * c2
            total += term
        return 2 / math.pi * (theta + (s * math.cos(theta) * total if dof > 1 else 0.0))
    term, total = 1.0, 1.0  # even: sin (1 + 1/2 cos^2 + 1.3/(2.4) cos^4 ...)
    for k in range(1, dof // 2):
        term *= (2 * k - 1) / (2 * k) * c2
        total += term
    return s * total
