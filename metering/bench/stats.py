"""Statistics of a benchmark, all from raw per-run timings (integer nanoseconds).

A *block* is one arm's consecutive runs inside one interleaved round; its *block mean* is
the sum of its run times over its run count.  Paired blocks are the two arms' blocks of
the same round.  Everything here is a pure function of the raw timings (and, for the
bootstrap, a recorded seed), so `luminal report verify` recomputes it bit for bit.

- per arm: min, mean, p50, p90, p99 (numpy's linear interpolation over every run), runs,
  blocks, throughput (samples per second over the summed run time) and the coefficient of
  variation of the block means (sample standard deviation / mean);
- speedup: median baseline block mean / median candidate block mean (ratio of medians),
  with a percentile bootstrap interval over the paired blocks: each resample draws rounds
  with replacement, keeping both arms of a round together, so noise that hits both arms
  in one round cancels in the ratio.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

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
    cv: float  # of the block means
    throughput: float  # samples (batch items) per second of run time

    def to_json(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class Ratio:
    point: float
    lower: float
    upper: float
    confidence: float
    resamples: int
    seed: int

    def to_json(self) -> dict[str, float]:
        return asdict(self)


def block_means(blocks: Blocks) -> np.ndarray:
    """Mean run time of each block, in ns."""
    return np.array([float(np.sum(b, dtype=np.int64)) / len(b) for b in blocks], np.float64)


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


def ratio_of_medians(
    baseline: np.ndarray,
    candidate: np.ndarray,
    *,
    seed: int,
    resamples: int = 10_000,
    confidence: float = 0.95,
) -> Ratio:
    """median(baseline) / median(candidate) over paired values (one pair per round), with a
    percentile bootstrap interval that resamples the pairs."""
    if baseline.shape != candidate.shape or baseline.ndim != 1:
        raise ValueError("paired samples must be two 1-D arrays of the same length")
    n = baseline.size
    if n == 0:
        return Ratio(0.0, 0.0, 0.0, confidence, resamples, seed)
    point = float(np.median(baseline) / np.median(candidate))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    ratios = np.median(baseline[idx], axis=1) / np.median(candidate[idx], axis=1)
    alpha = (1.0 - confidence) / 2.0
    lower, upper = (float(v) for v in np.quantile(ratios, [alpha, 1.0 - alpha]))
    return Ratio(point, lower, upper, confidence, resamples, seed)


def median_ratio(slow: Blocks, fast: Blocks) -> float:
    """Median run time of `slow` over median run time of `fast` (TEST04's statistic)."""
    a = np.concatenate([np.asarray(b, np.int64) for b in slow])
    b = np.concatenate([np.asarray(b, np.int64) for b in fast])
    return float(np.median(a) / np.median(b))
