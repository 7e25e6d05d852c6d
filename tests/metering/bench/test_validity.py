"""VALID only when parity, counts, the interval's width and both audits hold; savings only
then.  Every run here is on the fake clock, so noise and drift are chosen, not suffered."""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

import numpy as np

from luminal.metering.bench import audit, derive, inputs
from luminal.metering.bench.audit import Caching, caching
from luminal.metering.bench.method import MethodSettings
from tests.helpers.bench_helpers import (
    FAST,
    PRICING,
    SPECS,
    CachingArm,
    FakeArm,
    FakeClock,
    LazyArm,
    WrongArm,
    fake_run,
    honest,
)


def _failed(results: dict) -> set[str]:
    return {c["name"] for c in results["validity"]["checks"] if not c["ok"]}


def _detail(results: dict, name: str) -> str:
    return next(c["detail"] for c in results["validity"]["checks"] if c["name"] == name)


def test_honest_faster_model_is_valid_and_claims_savings() -> None:
    r = derive(fake_run(honest(2.0, sigma=0.02), sigma=0.02, pricing=PRICING).predicate)
    assert r["validity"]["verdict"] == "VALID", r["validity"]["reasons"]
    assert r["validity"]["fix"] is None
    sp = r["speedup"]
    assert sp["scenario"] == "latency" and 1.9 < sp["lower"] <= sp["point"] <= sp["upper"] < 2.1
    assert sp["billable"] and sp["halfwidth"] <= FAST.target_halfwidth
    s = r["savings"]
    assert s["claimed"] and s["speedup"] == repr(sp["lower"])
    # 1.50 x (1 - 1/lower), one third to the vendor, per 1000 h
    exact = 1.5 * (1 - 1 / sp["lower"]) * 1000
    assert abs(float(s["per_1000_hours"]["savings"]) - exact) < 0.006
    k = {name: Decimal(v) for name, v in s["per_1000_hours"].items() if name != "currency"}
    assert abs(k["fee"] - k["savings"] / 3) <= Decimal("0.005")
    assert k["savings"] - k["fee"] == k["customer_keeps"]
    assert r["test04"]["ok"] and r["test04"]["outcome"] == "clear"
    assert 0.9 < r["test04"]["ratio"]["point"] < 1.1


def test_drift_that_slows_both_arms_leaves_the_estimate_unchanged() -> None:
    """The whole machine slows down and speeds up again (up to 3x, over about a second):
    each arm's block means spread far beyond any per-arm cap, the paired estimate not."""
    steady = derive(fake_run(honest(2.0)).predicate)

    def drift(now: int) -> float:
        return 2.0 + math.sin(2 * math.pi * now / 0.8e9)

    drifting = derive(fake_run(honest(2.0), drift=drift).predicate)
    assert drifting["validity"]["verdict"] == "VALID", drifting["validity"]["reasons"]
    assert min(drifting["scenarios"]["latency"][a]["cv"] for a in ("baseline", "luminal")) > 0.2
    sp = drifting["speedup"]
    assert abs(sp["point"] - steady["speedup"]["point"]) < 0.01 * 2.0
    assert sp["lower"] <= 2.0 <= sp["upper"]


def test_a_noisy_but_honest_speedup_is_valid_once_enough_blocks_have_run() -> None:
    """Per-run lognormal noise of sigma 0.4 (block means spread ~15%): the floors (20
    blocks, 0.5 s) are not enough for +-5%, so the timed phase goes on until it is."""
    for seed in range(3):
        cand = lambda c, s=seed: FakeArm(c, 1e6 / 1.5, sigma=0.4, seed=10 + s)  # noqa: E731
        r = derive(fake_run(cand, sigma=0.4).predicate)
        assert r["validity"]["verdict"] == "VALID", r["validity"]["reasons"]
        sp = r["speedup"]
        assert sp["pairs"] > FAST.min_blocks and sp["halfwidth"] <= FAST.target_halfwidth
        assert sp["lower"] <= 1.5 <= sp["upper"]


def test_an_interval_too_wide_to_bill_on_is_invalid_with_why_and_what_to_do() -> None:
    method = MethodSettings(**{**FAST.__dict__, "max_duration_s": 0.6})  # capped early
    cand = lambda c: FakeArm(c, 1e6 / 1.5, sigma=0.6, seed=3)  # noqa: E731
    r = derive(fake_run(cand, sigma=0.6, method=method, pricing=PRICING).predicate)
    assert _failed(r) == {"latency.interval"}, r["validity"]["reasons"]
    hw = r["scenarios"]["latency"]["speedup"]["halfwidth"]
    assert hw > 0.05
    detail = _detail(r, "latency.interval")
    assert f"the speedup interval is ±{hw:.1%}, wider than the ±5% needed to bill on" in detail
    assert "run longer with --duration" in r["validity"]["fix"]
    assert "--cpus" in r["validity"]["fix"]
    assert not r["speedup"]["billable"] and not r["savings"]["claimed"]


def test_too_few_blocks_is_invalid_with_the_reason() -> None:
    method = MethodSettings(**{**FAST.__dict__, "min_blocks": 1000, "max_duration_s": 0.6})
    r = derive(fake_run(honest(2.0), method=method).predicate)
    assert _failed(r) == {"latency.blocks"}
    assert "paired blocks, minimum 1000" in _detail(r, "latency.blocks")
    assert r["validity"]["fix"].startswith("run longer with --duration")


def test_a_too_short_run_is_invalid() -> None:
    method = MethodSettings(**{**FAST.__dict__, "min_runs": 10**6, "max_duration_s": 0.6})
    r = derive(fake_run(honest(2.0), method=method).predicate)
    assert _failed(r) == {"latency.runs"}


def test_wrong_outputs_make_the_run_invalid_and_claim_nothing() -> None:
    run = fake_run(lambda c: WrongArm(c, 500_000), pricing=PRICING)
    r = derive(run.predicate)
    assert r["validity"]["verdict"] == "INVALID"
    assert {"parity", "test01"} <= _failed(r)
    assert "--model" in r["validity"]["fix"]  # correctness is said first
    assert not r["savings"]["claimed"] and "INVALID" in r["savings"]["reason"]
    out = run.predicate["parity"]["outputs"][0]
    assert out["mismatched"] == out["total"] and abs(out["max_abs"] - 0.1) < 1e-6


def test_a_cached_fake_compiled_model_is_caught_by_the_repeated_input_check() -> None:
    r = derive(fake_run(lambda c: CachingArm(c, 500_000), pricing=PRICING).predicate)
    assert _failed(r) == {"test04"}, r["validity"]["reasons"]
    assert r["test04"]["ratio"]["lower"] > 10  # the repeated input comes back at once
    assert r["test04"]["outcome"] == "cached"
    assert "cached" in " ".join(r["validity"]["reasons"])
    assert not r["savings"]["claimed"]


@dataclass
class HalfCachingArm(CachingArm):
    """Twice as fast on an input it has seen (a real but partial cache), with noise."""

    def cost(self, feeds):  # type: ignore[no-untyped-def]
        seen = feeds["x"].tobytes() in self.cache
        noise = float(np.exp(self.rng.normal(0.0, self.sigma))) if self.sigma else 1.0
        return (0.5 if seen else 1.0) * self.latency_ns * noise


def _test04(arm: FakeArm, clock: FakeClock) -> Caching:
    sets = inputs.seeded(SPECS, 0, 1).sets
    arm(sets[0])  # the repeated input has been seen, as in the timed phase
    t = audit.test04(arm, sets[0], inputs.fresh(SPECS, 100), 10, clock=clock)
    return caching(audit.fresh_over_repeated(t.fresh, t.repeated, 0.95), FAST.audit_threshold)


def test_test04_never_accuses_on_pure_noise() -> None:
    """An honest model on a very noisy machine (per-run lognormal sigma 0.5, bursts of 3x
    in a tenth of the runs): the interval widens around 1, it does not cross 1.10."""
    outcomes = set()
    for seed in range(200):
        clock = FakeClock()
        noisy = FakeArm(clock, 1e6, sigma=0.5, seed=seed)
        bursts = np.random.default_rng(seed)
        clock.drift = lambda now, b=bursts: 3.0 if b.random() < 0.1 else 1.0  # type: ignore[misc]
        outcomes.add(_test04(noisy, clock))
    assert Caching.CACHED not in outcomes
    assert Caching.INCONCLUSIVE in outcomes  # the noise is real: it is said, not billed


def test_test04_catches_a_real_2x_cache_effect_on_a_noisy_machine() -> None:
    for seed in range(20):
        clock = FakeClock()
        assert _test04(HalfCachingArm(clock, 1e6, sigma=0.2, seed=seed), clock) is Caching.CACHED


def test_outputs_wrong_only_while_timed_are_caught_by_test01() -> None:
    r = derive(fake_run(lambda c: LazyArm(c, 500_000)).predicate)
    assert _failed(r) == {"test01"}, r["validity"]["reasons"]


def test_no_savings_without_a_speedup_or_a_price() -> None:
    slower = derive(fake_run(honest(0.8), pricing=PRICING).predicate)
    assert slower["validity"]["valid"] and not slower["savings"]["claimed"]
    assert "not above 1" in slower["savings"]["reason"]
    unpriced = derive(fake_run(honest(2.0)).predicate)
    assert not unpriced["savings"]["claimed"] and "no price" in unpriced["savings"]["reason"]
