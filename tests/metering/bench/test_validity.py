"""VALID only when parity, counts, spread and both audits hold; savings only then."""

from __future__ import annotations

from decimal import Decimal

from luminal.metering.bench import derive
from luminal.metering.bench.method import MethodSettings
from tests.helpers.bench_helpers import (
    FAST,
    PRICING,
    CachingArm,
    LazyArm,
    WrongArm,
    fake_run,
    honest,
)


def _failed(results: dict) -> set[str]:
    return {c["name"] for c in results["validity"]["checks"] if not c["ok"]}


def test_honest_faster_model_is_valid_and_claims_savings() -> None:
    r = derive(fake_run(honest(2.0, sigma=0.02), sigma=0.02, pricing=PRICING).predicate)
    assert r["validity"]["verdict"] == "VALID", r["validity"]["reasons"]
    sp = r["speedup"]
    assert sp["scenario"] == "latency" and 1.9 < sp["lower"] <= sp["point"] <= sp["upper"] < 2.1
    s = r["savings"]
    assert s["claimed"] and s["speedup"] == repr(sp["lower"])
    # 1.50 x (1 - 1/lower), one third to the vendor, per 1000 h
    exact = 1.5 * (1 - 1 / sp["lower"]) * 1000
    assert abs(float(s["per_1000_hours"]["savings"]) - exact) < 0.006
    k = {name: Decimal(v) for name, v in s["per_1000_hours"].items() if name != "currency"}
    assert abs(k["fee"] - k["savings"] / 3) <= Decimal("0.005")
    assert k["savings"] - k["fee"] == k["customer_keeps"]
    assert r["test04"]["ok"] and 0.9 < r["test04"]["ratio"] < 1.1


def test_wrong_outputs_make_the_run_invalid_and_claim_nothing() -> None:
    run = fake_run(lambda c: WrongArm(c, 500_000), pricing=PRICING)
    r = derive(run.predicate)
    assert r["validity"]["verdict"] == "INVALID"
    assert {"parity", "test01"} <= _failed(r)
    assert not r["savings"]["claimed"] and "INVALID" in r["savings"]["reason"]
    out = run.predicate["parity"]["outputs"][0]
    assert out["mismatched"] == out["total"] and abs(out["max_abs"] - 0.1) < 1e-6


def test_a_cached_fake_compiled_model_is_caught_by_the_repeated_input_check() -> None:
    r = derive(fake_run(lambda c: CachingArm(c, 500_000), pricing=PRICING).predicate)
    assert _failed(r) == {"test04"}, r["validity"]["reasons"]
    assert r["test04"]["ratio"] > 10  # the repeated input comes back from the cache at once
    assert "cached" in " ".join(r["validity"]["reasons"])
    assert not r["savings"]["claimed"]


def test_outputs_wrong_only_while_timed_are_caught_by_test01() -> None:
    r = derive(fake_run(lambda c: LazyArm(c, 500_000)).predicate)
    assert _failed(r) == {"test01"}, r["validity"]["reasons"]


def test_noisy_timings_fail_the_spread_check() -> None:
    r = derive(fake_run(honest(2.0, sigma=0.4), sigma=0.4).predicate)
    assert "latency.spread" in _failed(r)


def test_a_too_short_run_is_invalid() -> None:
    method = MethodSettings(**{**FAST.__dict__, "min_runs": 10**6, "max_duration_s": 0.6})
    r = derive(fake_run(honest(2.0), method=method).predicate)
    assert _failed(r) == {"latency.runs"}


def test_no_savings_without_a_speedup_or_a_price() -> None:
    slower = derive(fake_run(honest(0.8), pricing=PRICING).predicate)
    assert slower["validity"]["valid"] and not slower["savings"]["claimed"]
    assert "not above 1" in slower["savings"]["reason"]
    unpriced = derive(fake_run(honest(2.0)).predicate)
    assert not unpriced["savings"]["claimed"] and "no price" in unpriced["savings"]["reason"]
