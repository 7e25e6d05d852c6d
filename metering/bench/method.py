"""The measuring harness: warm-up until timings settle, then the arms interleaved in blocks.

    first run    each arm runs once, untimed for the statistics (lazy compilation, page-in)
    probe        a few single runs per arm estimate its latency; each arm then gets the
                 number of runs that makes one block last about `block_s`
    warm-up      interleaved blocks until each arm's last `warmup_window` block means lie
                 within `warmup_tolerance` of each other (or `warmup_max_s` passes); the
                 runs per block are then set again from the last warm-up block means
    timed        rounds until the speedup's interval is narrow enough to bill on (its
                 relative half-width at most `target_halfwidth`), with floors: at least
                 `duration_s` have passed, every arm has made `min_runs` runs and
                 `min_blocks` rounds are done; `max_duration_s` caps it.  Each round runs
                 one block of every arm, in a freshly shuffled order: round i is pair i of
                 the paired estimator (`stats.paired_ratio`)

Stopping when the interval is narrow enough is the fixed-width sequential procedure of Chow
and Robbins (1965): the rule looks at the interval's width (the spread of the log ratios),
not at the estimate, so with the floors above the interval's coverage stays close to
nominal.  A noisy machine needs more rounds, not a different verdict; the cap keeps a
hopeless one finite, and then the run is INVALID with the width it reached.

Before every block the harness pauses `settle_s` (untimed), so each block starts on a quiet
machine: an engine's leftover background work is not charged to the next arm.  ONNX
Runtime's worker threads, for one, keep spinning for tens of milliseconds after a run
(measured: about 40 ms of CPU in the 100 ms after each call on 2 cores), which without the
pause lands in whichever arm runs next.

Every run is timed on its own (the clock is read right before and right after the call), so
the report holds each run's time and percentiles are of single inferences.  Runs cycle
through the input sets in the same order for every arm.  During the timed phase, one run in
a uniformly chosen subset of the candidate's blocks (a reservoir of `audit_samples`) keeps
a copy of its outputs, taken after the clock is read, for the TEST01 audit.

The clock and the arms are injectable: tests drive the harness with a fake clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from luminal.errors import UsageError
from luminal.metering.bench.stats import paired_blocks

Feeds = Mapping[str, np.ndarray]
Outputs = Mapping[str, np.ndarray]
Arm = Callable[[Feeds], Outputs]
Clock = Callable[[], int]  # nanoseconds
Progress = Callable[[str, float, str], None]  # phase, fraction done, detail ("23 blocks")


@dataclass(frozen=True)
class MethodSettings:
    duration_s: float = 10.0
    min_runs: int = 100
    min_blocks: int = 20
    block_s: float = 0.05
    settle_s: float = 0.1  # untimed pause before every block (see the module docstring)
    max_duration_s: float | None = None  # default max(3 x duration, duration + 60 s)
    warmup_window: int = 5
    warmup_tolerance: float = 0.10
    warmup_max_s: float | None = None  # default: the duration, between 1 and 10 s
    target_halfwidth: float = 0.05  # the speedup interval's relative half-width to bill on
    confidence: float = 0.95
    seed: int = 0  # block order and audit sampling
    audit_samples: int = 32  # TEST01: outputs kept during the timed phase
    audit_runs: int = 100  # TEST04: runs on the repeated input, and as many on fresh ones
    audit_threshold: float = 0.10  # TEST04: margin over 1.0 the interval must clear to accuse

    def __post_init__(self) -> None:
        for name in ("duration_s", "block_s", "warmup_tolerance", "target_halfwidth"):
            if getattr(self, name) <= 0:
                raise UsageError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("min_runs", "min_blocks", "warmup_window"):
            if getattr(self, name) < 1:
                raise UsageError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0 < self.confidence < 1:
            raise UsageError(f"confidence must be in (0, 1), got {self.confidence}")

    @property
    def max_s(self) -> float:
        if self.max_duration_s is not None:
            return self.max_duration_s
        return max(3 * self.duration_s, self.duration_s + 60)

    @property
    def warmup_s(self) -> float:
        if self.warmup_max_s is not None:
            return self.warmup_max_s
        return min(10.0, max(1.0, self.duration_s))

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["max_duration_s"] = self.max_s
        data["warmup_max_s"] = self.warmup_s
        return data


@dataclass
class ArmRecord:
    first_run_ns: int = 0
    probe_ns: list[int] = field(default_factory=list)
    runs_per_block: int = 1
    warmup_blocks: list[list[int]] = field(default_factory=list)  # [runs, total ns] each
    settled: bool = False
    blocks: list[list[int]] = field(default_factory=list)  # timed: per block, per run ns

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Sample:
    """Outputs of one timed run, kept for the TEST01 audit."""

    round: int
    run: int  # index of the run within its block
    input_set: int
    outputs: dict[str, np.ndarray]


@dataclass
class Measurement:
    arms: dict[str, ArmRecord]
    order: list[list[str]]  # arms in the order they ran, per round
    elapsed_ns: int = 0  # wall time of the timed phase
    warmup_ns: int = 0
    samples: list[Sample] = field(default_factory=list)

    def raw_json(self) -> dict[str, object]:
        return {
            "arms": {name: rec.to_json() for name, rec in self.arms.items()},
            "order": self.order,
            "elapsed_ns": self.elapsed_ns,
            "warmup_ns": self.warmup_ns,
        }


def measure(
    arms: Mapping[str, Arm],
    input_sets: Sequence[Feeds],
    settings: MethodSettings,
    *,
    sample_arm: str | None = None,
    pair: tuple[str, str] | None = None,
    clock: Clock = time.perf_counter_ns,
    progress: Progress | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Measurement:
    """Run the method on `arms` (name -> callable); the result holds every timing.

    `pair` names the speedup's (slower, faster) arms, e.g. (baseline, candidate): the timed
    phase then runs until their paired interval is narrow enough; without it, the floors
    alone end it."""
    if not input_sets:
        raise UsageError("no input sets to benchmark with")
    rng = np.random.default_rng(settings.seed)
    m = Measurement({name: ArmRecord() for name in arms}, [])
    cursor = dict.fromkeys(arms, 0)  # next input set, per arm

    def block(
        name: str, runs: int, keep: int | None, settle: bool = False
    ) -> tuple[list[int], Sample | None]:
        fn, times, kept = arms[name], [], None
        if settle and settings.settle_s > 0 and len(arms) > 1:
            sleep(settings.settle_s)
        for r in range(runs):
            k = cursor[name] % len(input_sets)
            cursor[name] += 1
            t0 = clock()
            out = fn(input_sets[k])
            t1 = clock()
            times.append(t1 - t0)
            if r == keep:
                kept = Sample(len(m.order), r, k, {n: np.array(v) for n, v in out.items()})
        return times, kept

    for name in arms:
        rec = m.arms[name]
        rec.first_run_ns = block(name, 1, None)[0][0]
        start = clock()
        while len(rec.probe_ns) < 3 or (
            len(rec.probe_ns) < 20 and clock() - start < settings.block_s * 1e9
        ):
            rec.probe_ns.extend(block(name, 1, None)[0])
        typical = max(float(np.median(rec.probe_ns)), 1.0)
        rec.runs_per_block = int(min(100_000, max(1, round(settings.block_s * 1e9 / typical))))

    start = clock()
    while not all(r.settled for r in m.arms.values()):
        if clock() - start >= settings.warmup_s * 1e9:
            break
        for name in arms:
            rec = m.arms[name]
            times, _ = block(name, rec.runs_per_block, None, settle=True)
            rec.warmup_blocks.append([len(times), sum(times)])
            recent = [t / n for n, t in rec.warmup_blocks[-settings.warmup_window :]]
            rec.settled = len(recent) == settings.warmup_window and max(recent) <= min(recent) * (
                1 + settings.warmup_tolerance
            )
        if progress:
            frac = min(1.0, (clock() - start) / (settings.warmup_s * 1e9))
            progress("warm-up", frac, f"{len(next(iter(m.arms.values())).warmup_blocks)} blocks")
    m.warmup_ns = clock() - start
    for rec in m.arms.values():  # blocks of about block_s at the warmed-up speed
        recent = [t / n for n, t in rec.warmup_blocks[-settings.warmup_window :]]
        if recent:
            typical = max(float(np.median(recent)), 1.0)
            rec.runs_per_block = int(min(100_000, max(1, round(settings.block_s * 1e9 / typical))))

    for name in arms:
        cursor[name] = 0
    start = clock()
    seen = 0  # blocks of the sample arm, for the reservoir
    while True:
        elapsed = clock() - start
        width = _halfwidth(m, pair, settings.confidence)
        done = _done(m, settings, elapsed, pair is not None, width)
        if progress and m.order:
            detail = f"{len(m.order)} blocks" + (
                f", speedup interval ±{width:.1%}" if width is not None else ""
            )
            progress("timed", done, detail)
        if done >= 1.0 or elapsed >= settings.max_s * 1e9:
            break
        order = list(arms)
        rng.shuffle(order)
        for name in order:
            rec = m.arms[name]
            keep, slot = None, None
            if name == sample_arm and settings.audit_samples > 0:
                slot = seen if seen < settings.audit_samples else int(rng.integers(0, seen + 1))
                seen += 1
                if slot < settings.audit_samples:
                    keep = int(rng.integers(0, rec.runs_per_block))
            times, kept = block(name, rec.runs_per_block, keep, settle=True)
            rec.blocks.append(times)
            if kept is not None and slot is not None:
                if slot < len(m.samples):
                    m.samples[slot] = kept
                else:
                    m.samples.append(kept)
        m.order.append(order)
    m.elapsed_ns = clock() - start
    m.samples.sort(key=lambda s: s.round)
    return m


def _halfwidth(m: Measurement, pair: tuple[str, str] | None, confidence: float) -> float | None:
    """The paired interval's relative half-width so far (None: no pair, or < 2 rounds)."""
    if pair is None:
        return None
    slow, fast = (m.arms[name].blocks for name in pair)
    return paired_blocks(slow, fast, confidence).halfwidth


def _done(
    m: Measurement, s: MethodSettings, elapsed: int, paired: bool, width: float | None
) -> float:
    """How far the timed phase is, 0..1 (1: stop): the least advanced of its criteria.  The
    interval's width shrinks as 1/sqrt(rounds), so (target / width)^2 estimates the share of
    the rounds it needs that are done."""
    runs = min(sum(map(len, r.blocks)) for r in m.arms.values())
    parts = [elapsed / (s.duration_s * 1e9), len(m.order) / s.min_blocks, runs / s.min_runs]
    if paired:
        if width is None:
            parts.append(0.0)
        else:
            parts.append(1.0 if width <= s.target_halfwidth else (s.target_halfwidth / width) ** 2)
    return min(1.0, *parts)
