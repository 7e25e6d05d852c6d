"""The harness on a fake clock: warm-up, calibration, interleaving, sampling."""

from __future__ import annotations

import numpy as np

from luminal.metering.bench import inputs
from luminal.metering.bench.method import MethodSettings, measure
from luminal.metering.bench.stats import paired_blocks
from tests.helpers.bench_helpers import FAST, SPECS, FakeArm, FakeClock, model

PAIR = ("baseline", "luminal")


def test_interleaved_blocks_meet_duration_and_counts() -> None:
    clock = FakeClock()
    a, b = FakeArm(clock, 1_000_000), FakeArm(clock, 250_000)
    sets = inputs.seeded(SPECS, 0, 3).sets
    m = measure({"baseline": a, "luminal": b}, sets, FAST, clock=clock, sample_arm="luminal")
    assert m.elapsed_ns >= FAST.duration_s * 1e9
    assert len(m.order) >= FAST.min_blocks
    ra, rb = m.arms["baseline"], m.arms["luminal"]
    # blocks of about block_s: 10 ms / 1 ms and 10 ms / 0.25 ms
    assert ra.runs_per_block == 10 and rb.runs_per_block == 40
    assert len(ra.blocks) == len(rb.blocks) == len(m.order)
    assert all(t == 1_000_000 for blk in ra.blocks for t in blk)
    assert sum(map(len, ra.blocks)) >= FAST.min_runs
    # both orders occur: the order is shuffled each round
    assert {tuple(o) for o in m.order} == {("baseline", "luminal"), ("luminal", "baseline")}
    # constant speed settles at the first window
    assert ra.settled and len(ra.warmup_blocks) == FAST.warmup_window


def test_both_arms_see_the_same_input_sequence() -> None:
    clock = FakeClock()
    a, b = FakeArm(clock, 1_000_000), FakeArm(clock, 1_000_000)
    sets = inputs.seeded(SPECS, 0, 3).sets
    measure({"baseline": a, "luminal": b}, sets, FAST, clock=clock)
    assert a.seen == b.seen
    assert set(a.seen) == {id(s) for s in sets}


def test_warm_up_waits_until_timings_settle() -> None:
    clock = FakeClock()
    slow_start = FakeArm(clock, 1_000_000, warmup_calls=30)
    other = FakeArm(clock, 1_000_000)
    settings = MethodSettings(**{**FAST.__dict__, "warmup_max_s": 5.0})
    m = measure(
        {"baseline": other, "luminal": slow_start},
        inputs.seeded(SPECS, 0, 1).sets,
        settings,
        clock=clock,
    )
    rec = m.arms["luminal"]
    assert rec.settled and len(rec.warmup_blocks) > settings.warmup_window
    # runs per block are set again from the warmed-up speed, and timed runs are all fast
    assert rec.runs_per_block == 10
    assert max(t for blk in rec.blocks for t in blk) == 1_000_000


def test_warm_up_that_never_settles_is_bounded() -> None:
    clock = FakeClock()
    noisy = FakeArm(clock, 1_000_000, sigma=0.5)
    m = measure(
        {"baseline": FakeArm(clock, 1_000_000), "luminal": noisy},
        inputs.seeded(SPECS, 0, 1).sets,
        FAST,
        clock=clock,
    )
    assert not m.arms["luminal"].settled
    assert m.warmup_ns < (FAST.warmup_s + 0.1) * 1e9


def test_outputs_are_sampled_during_the_timed_run() -> None:
    clock = FakeClock()
    sets = inputs.seeded(SPECS, 0, 4).sets
    m = measure(
        {"baseline": FakeArm(clock, 1e6), "luminal": FakeArm(clock, 1e6)},
        sets,
        FAST,
        clock=clock,
        sample_arm="luminal",
    )
    assert len(m.samples) == FAST.audit_samples
    rounds = [s.round for s in m.samples]
    assert rounds == sorted(set(rounds))  # distinct rounds, in order
    for s in m.samples:
        np.testing.assert_array_equal(s.outputs["y"], model(sets[s.input_set])["y"])


def test_max_duration_stops_a_run_that_cannot_reach_its_counts() -> None:
    clock = FakeClock()
    settings = MethodSettings(**{**FAST.__dict__, "min_runs": 10**6, "max_duration_s": 1.0})
    m = measure(
        {"baseline": FakeArm(clock, 1e6), "luminal": FakeArm(clock, 1e6)},
        inputs.seeded(SPECS, 0, 1).sets,
        settings,
        clock=clock,
    )
    assert 1.0e9 <= m.elapsed_ns < 1.1e9


def test_the_timed_phase_runs_until_the_interval_is_narrow_enough() -> None:
    """Noisy arms: the floors (20 rounds, 0.5 s) come first, the target width later."""
    clock = FakeClock()
    arms = {
        "baseline": FakeArm(clock, 1e6, sigma=0.8, seed=1),
        "luminal": FakeArm(clock, 5e5, sigma=0.8, seed=2),
    }
    m = measure(arms, inputs.seeded(SPECS, 0, 2).sets, FAST, clock=clock, pair=PAIR)
    r = paired_blocks(m.arms["baseline"].blocks, m.arms["luminal"].blocks)
    assert r.halfwidth is not None and r.halfwidth <= FAST.target_halfwidth
    assert len(m.order) > FAST.min_blocks and m.elapsed_ns > 1.5 * FAST.duration_s * 1e9
    # one round fewer was not enough: it stopped at the first round that was
    fewer = paired_blocks(m.arms["baseline"].blocks[:-1], m.arms["luminal"].blocks[:-1])
    assert fewer.halfwidth is not None and fewer.halfwidth > FAST.target_halfwidth


def test_a_target_it_cannot_reach_stops_at_the_cap_and_progress_says_so() -> None:
    clock = FakeClock()
    settings = MethodSettings(**{**FAST.__dict__, "target_halfwidth": 1e-6, "max_duration_s": 1.0})
    seen: list[tuple[str, float, str]] = []
    m = measure(
        {
            "baseline": FakeArm(clock, 1e6, sigma=0.3, seed=1),
            "luminal": FakeArm(clock, 1e6, sigma=0.3, seed=2),
        },
        inputs.seeded(SPECS, 0, 1).sets,
        settings,
        clock=clock,
        pair=PAIR,
        progress=lambda phase, done, detail: seen.append((phase, done, detail)),
    )
    assert 1.0e9 <= m.elapsed_ns < 1.1e9
    timed = [s for s in seen if s[0] == "timed"]
    assert timed[-1][2].startswith(f"{len(m.order)} blocks, speedup interval ±")
    assert all(0 <= done < 1 for _, done, _ in timed)
    assert {s[0] for s in seen} == {"warm-up", "timed"}
