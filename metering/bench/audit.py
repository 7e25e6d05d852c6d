"""Audits borrowed from MLPerf's compliance tests.

TEST01 (outputs during the timed run): the harness keeps the outputs of sampled runs of
the timed phase (`method.measure`); each is compared with the baseline's outputs for the
same input set.  A model that is fast only because it skips work while being timed fails.

TEST04 (caching): the compiled model runs `audit_runs` times on one repeated input (one it
has already seen) and `audit_runs` times on inputs it has never seen (each used once), in
interleaved blocks, the side that goes first alternating.  Block k of each side is a pair,
and the paired estimator (`stats.paired_ratio`) of the blocks' median runs gives fresh time
/ repeated time with its interval (medians: a cache speeds up every repeated run, while a
stall of a loaded machine, which dominates a short block's mean, is one run).  `caching` decides by the interval, not by a point ratio: results look cached only
when even the interval's lower bound is above 1 + `audit_threshold` (the repeated input
surely more than 10% faster).  Noise widens the interval around 1 instead of tipping a point
estimate over a line, so a noisy machine is never accused; an interval that reaches past
the margin without clearing it is inconclusive (a warning, not a failure).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from luminal.metering.bench.method import Arm, Clock, Feeds, Sample
from luminal.metering.bench.outputs import OutputCheck, check_outputs
from luminal.metering.bench.stats import Ratio, block_medians, paired_ratio
from luminal.references.parity import Tolerance


@dataclass(frozen=True)
class SampleCheck:
    round: int
    run: int
    input_set: int
    ok: bool
    max_abs: float
    failed: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "round": self.round,
            "run": self.run,
            "input_set": self.input_set,
            "ok": self.ok,
            "max_abs": self.max_abs if np.isfinite(self.max_abs) else None,
            "failed": list(self.failed),
        }


def test01(
    samples: Sequence[Sample],
    references: Sequence[Mapping[str, np.ndarray]],
    tolerances: Mapping[str, Tolerance],
) -> list[SampleCheck]:
    """Each sampled output against the baseline's outputs for its input set."""
    out = []
    for s in samples:
        checks: list[OutputCheck] = check_outputs(s.outputs, references[s.input_set], tolerances)
        out.append(
            SampleCheck(
                s.round,
                s.run,
                s.input_set,
                all(c.ok for c in checks),
                max((c.max_abs for c in checks), default=0.0),
                tuple(c.name for c in checks if not c.ok),
            )
        )
    return out


@dataclass(frozen=True)
class Test04Timings:
    repeated: list[list[int]]  # per block, per run ns
    fresh: list[list[int]]

    def to_json(self) -> dict[str, object]:
        return {"repeated_ns": self.repeated, "fresh_ns": self.fresh}


def test04(
    arm: Arm,
    repeated: Feeds,
    fresh: Sequence[Feeds],
    block: int,
    *,
    clock: Clock = time.perf_counter_ns,
) -> Test04Timings:
    """Interleaved blocks of `block` runs on the repeated input and on fresh inputs (each
    used once), the side that goes first alternating."""
    m = max(1, min(block, len(fresh)))
    rounds = len(fresh) // m
    timings = Test04Timings([], [])
    for k in range(rounds):
        chunk = fresh[k * m : (k + 1) * m]
        sides = [("repeated", [repeated] * len(chunk)), ("fresh", list(chunk))]
        if k % 2:
            sides.reverse()
        for side, feeds in sides:
            times = []
            for f in feeds:
                t0 = clock()
                arm(f)
                times.append(clock() - t0)
            getattr(timings, side).append(times)
    return timings


class Caching(Enum):
    """TEST04's outcome, from the interval of fresh time / repeated time."""

    CLEAR = "clear"  # the whole interval is within 1 + threshold
    INCONCLUSIVE = "inconclusive"  # it reaches past 1 + threshold, its lower bound does not
    CACHED = "cached"  # even the lower bound is past 1 + threshold
    NOT_RUN = "not run"


def fresh_over_repeated(
    fresh: Sequence[Sequence[int]], repeated: Sequence[Sequence[int]], confidence: float
) -> Ratio | None:
    """TEST04's statistic: fresh time / repeated time, paired by block, of block medians."""
    if not fresh or not repeated:
        return None
    return paired_ratio(block_medians(fresh), block_medians(repeated), confidence)


def caching(ratio: Ratio | None, threshold: float) -> Caching:
    if ratio is None or ratio.halfwidth is None:
        return Caching.NOT_RUN
    if ratio.lower > 1 + threshold:
        return Caching.CACHED
    if ratio.upper > 1 + threshold:
        return Caching.INCONCLUSIVE
    return Caching.CLEAR
